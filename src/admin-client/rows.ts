import type { Row } from "../domain/model.js";
import type { RawBody } from "../client/transport.js";

/** A rows body already in one of the upload formats: a JSON array, NDJSON, or CSV with a header row. */
export interface EncodedRows {
  format: "json" | "ndjson" | "csv";
  /** The text or bytes, whole or in chunks as they are produced (a stream or an iterable of chunks is read once, as it is sent). */
  body: string | Uint8Array | Blob | ReadableStream<Uint8Array> | Iterable<string | Uint8Array> | AsyncIterable<string | Uint8Array>;
}

/**
 * Rows to upload: row objects (an array, or any iterable or async iterable,
 * sent as NDJSON while it is iterated, so a generator of a million rows
 * never sits in memory), or a body already encoded.
 */
export type RowsUpload = Iterable<Row> | AsyncIterable<Row> | EncodedRows;

const CONTENT_TYPES: Record<EncodedRows["format"], string> = {
  json: "application/json",
  ndjson: "application/x-ndjson",
  csv: "text/csv; charset=utf-8",
};

/** An upload's body, and what its source threw while it was sent (the error the call raises rather than "fetch failed"). */
export interface Upload extends RawBody {
  failure: () => { error: unknown } | null;
}

/** The request body of an upload. Text, bytes, a Blob and an array of rows can be sent again on a retry; streams and other iterables once. */
export function uploadBody(rows: RowsUpload): Upload {
  let failed: { error: unknown } | null = null;
  const failure = () => failed;
  const stream = (chunks: Iterable<string | Uint8Array> | AsyncIterable<string | Uint8Array>) =>
    streamOf(chunks, (error) => {
      failed = { error };
    });
  if (isEncoded(rows)) {
    const { body } = rows;
    const contentType = CONTENT_TYPES[rows.format];
    if (typeof body === "string" || body instanceof Uint8Array || body instanceof Blob) {
      return { contentType, open: () => body as BodyInit, replayable: true, failure };
    }
    if (body instanceof ReadableStream) return { contentType, open: () => body, replayable: false, failure };
    return { contentType, open: () => stream(body), replayable: false, failure };
  }
  if (Array.isArray(rows)) return { contentType: CONTENT_TYPES.ndjson, open: () => rows.map(ndjsonLine).join(""), replayable: true, failure };
  return { contentType: CONTENT_TYPES.ndjson, open: () => stream(mapped(rows, ndjsonLine)), replayable: false, failure };
}

function isEncoded(rows: RowsUpload): rows is EncodedRows {
  return !(Symbol.iterator in rows) && !(Symbol.asyncIterator in rows);
}

function ndjsonLine(row: Row): string {
  return `${JSON.stringify(row)}\n`;
}

async function* mapped<T, U>(items: Iterable<T> | AsyncIterable<T>, map: (item: T) => U): AsyncGenerator<U> {
  for await (const item of items) yield map(item);
}

/**
 * A byte stream pulling from `chunks` one chunk at a time, so a producer is
 * only asked for more as the request body is sent; cancelling the stream
 * (an aborted or failed request) closes the iterator. What the producer
 * throws goes to `onError` and fails the stream, so the request is cut off
 * and the server stores nothing.
 */
function streamOf(chunks: Iterable<string | Uint8Array> | AsyncIterable<string | Uint8Array>, onError: (error: unknown) => void): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const iterator = Symbol.asyncIterator in chunks ? chunks[Symbol.asyncIterator]() : chunks[Symbol.iterator]();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      let next: IteratorResult<string | Uint8Array>;
      try {
        next = await iterator.next();
      } catch (error) {
        onError(error);
        throw error;
      }
      if (next.done) controller.close();
      else controller.enqueue(typeof next.value === "string" ? encoder.encode(next.value) : next.value);
    },
    async cancel() {
      await iterator.return?.();
    },
  });
}
