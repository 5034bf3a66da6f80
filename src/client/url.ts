/** A path segment: any id, encoded so it stays one segment. */
export function seg(value: string): string {
  return encodeURIComponent(value);
}

/** Query parameters, leaving out those that are undefined. */
export function query(values: Record<string, string | number | undefined>): URLSearchParams {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(values)) if (value !== undefined) params.set(key, String(value));
  return params;
}
