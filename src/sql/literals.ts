/**
 * What SQLite and PostgreSQL write alike in SQL text: quoted literals and
 * identifiers (for the few places a value must be inlined, such as an index
 * expression the planner matches verbatim), and the bound of a prefix range.
 */

/** A SQL string literal: `'…'` with each quote doubled. The caller makes sure the text holds no U+0000. */
export function quoteLiteral(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}

/** A SQL identifier in double quotes, each double quote doubled. */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * The least string above every string starting with `prefix` (its last code
 * point + 1, past the surrogates), or null when there is none: the strings
 * starting with `prefix` are exactly those in [prefix, prefixEnd(prefix)),
 * so a `startsWith` on an indexed column is a range seek.
 */
export function prefixEnd(prefix: string): string | null {
  const points = [...prefix];
  const last = points.pop()!.codePointAt(0)!;
  if (last >= 0x10ffff) return null;
  return points.join("") + String.fromCodePoint(last + 1 === 0xd800 ? 0xe000 : last + 1);
}
