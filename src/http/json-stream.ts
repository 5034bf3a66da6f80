/** Flush threshold: a streamed body is sent in chunks of about this many characters. */
const CHUNK = 64 * 1024;

/**
 * A JSON document of the form `prefix row,row,… suffix`. Small results come
 * back as one string; once the text passes one chunk the rest is streamed,
 * so a million-row read never sits in memory as one string. When the
 * consumer stops early (client gone) the row source is closed.
 */
export async function jsonRowsBody<T>(
  prefix: string,
  rows: AsyncIterable<T>,
  /** The closing text, or a function giving it once every row is written (it may depend on the rows). */
  suffix: string | (() => string),
  /** How a row becomes JSON text (an empty text adds nothing: see `joinedTexts`). */
  serialize: (row: T) => string = JSON.stringify,
): Promise<string | AsyncIterable<string>> {
  const iterator = rows[Symbol.asyncIterator]();
  let buffer = prefix;
  let first = true;
  for (;;) {
    const next = await iterator.next();
    if (next.done) return buffer + (typeof suffix === "string" ? suffix : suffix());
    const text = serialize(next.value);
    if (text === "") continue;
    buffer += (first ? "" : ",") + text;
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
          const text = serialize(next.value);
          if (text !== "") out += `,${text}`;
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

/**
 * For `jsonRowsBody` over batches of rows' JSON texts: a batch as one
 * comma-separated text ("" for an empty batch). A frozen batch (one a store
 * remembers and hands to every read of the same page) is joined once.
 */
export function joinedTexts(batch: readonly string[]): string {
  if (!Object.isFrozen(batch)) return batch.join(",");
  let text = joinedBatches.get(batch);
  if (text === undefined) {
    text = batch.join(",");
    joinedBatches.set(batch, text);
  }
  return text;
}

const joinedBatches = new WeakMap<readonly string[], string>();
