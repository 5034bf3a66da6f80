let formattedAt = Number.NaN;
let formatted = "";

/**
 * `new Date(ms).toISOString()`, formatted once per millisecond however many
 * requests share it (formatting costs more than a request's routing on the
 * hot paths that stamp every call: the usage log and webhook rows).
 */
export function isoTime(ms: number): string {
  if (ms !== formattedAt) {
    formatted = new Date(ms).toISOString();
    formattedAt = ms;
  }
  return formatted;
}
