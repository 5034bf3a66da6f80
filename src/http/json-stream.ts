/** Flush threshold: a streamed body is sent in chunks of about this many characters. */
const CHUNK = 64 * 1024;

/**
 * A JSON document of the form `prefix row,row,… suffix`. Small results come
 * back as one string; once the text passes one chunk the rest is streamed,
 * so a million-row read never sits in memory as one string. When the
 * consumer stops early (client gone) the row source is closed.
 */
export async function jsonRowsBody(
  prefix: string,
  rows: AsyncIterable<unknown>,
  /** The closing text, or a function giving it once every row is written (it may depend on the rows). */
  suffix: string | (() => string),
  /** How a row becomes JSON text; pass `String` for rows that already are JSON text. */
  serialize: (row: unknown) => string = JSON.stringify,
): Promise<string | AsyncIterable<string>> {
  const iterator = rows[Symbol.asyncIterator]();
  let buffer = prefix;
  let first = true;
  for (;;) {
    const next = await iterator.next();
    if (next.done) return buffer + (typeof suffix === "string" ? suffix : suffix());
    buffer += (first ? "" : ",") + serialize(next.value);
    first = false;
    if (buffer.length >= CHUNK) break;
  }
  const head = buffer;
  return {
    async *[Symbol.asyncIterator]() {
      let out = head;
      try {
        for (;;) {
          const next = await iterator.next();
          if (next.done) break;
          out += `,${serialize(next.value)}`;
          if (out.length >= CHUNK) {
            yield out;
            out = "";
          }
        }
        yield out + (typeof suffix === "string" ? suffix : suffix());
      } finally {
        await iterator.return?.();
      }
    },
  };
}
