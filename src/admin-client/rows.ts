import type { Row } from "../domain/model.js";
import type { RawBody } from "../client/transport.js";

/** A rows body already in one of the upload formats: a JSON array, NDJSON, or CSV with a header row. */
export interface EncodedRows {
  format: "json" | "ndjson" | "csv";
  /**
   * The text or bytes, whole or in chunks as they are produced (a stream or an iterable of chunks is read once, as it
   * is sent).
   */
  body:
    | string
    | Uint8Array
    | Blob
    | ReadableStream<Uint8Array>
    | Iterable<string | Uint8Array>
    | AsyncIterable<string | Uint8Array>;
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

/**
 * An upload's body, and what its source threw while it was sent (the error the call raises rather than "fetch failed").
 */
export interface Upload extends RawBody {
  failure: () => { error: unknown } | null;
}

/** How much of an upload's body has been handed to the connection: what `onProgress` receives. */
export interface UploadSent {
  /** Bytes of the body sent so far. */
  bytes: number;
  /** Rows sent so far when the client encodes them (row objects); null for a body already encoded. */
  rows: number | null;
  /** The whole body is sent: the server is storing it, and the call answers once it has. */
  done: boolean;
}

/** Who hears of an upload's progress, and how often. */
export interface UploadProgressOptions {
  /**
   * Called while the body is sent, at most once per `progressEveryMs`, and
   * once more with `done: true` when all of it is; a body in hand (text,
   * bytes, a Blob, an array of rows) is reported once, whole, as it is handed
   * over. The server's own progress is in its log (`upload progress` lines).
   */
  onProgress?: (progress: UploadSent) => void;
  /** The least time between two `onProgress` calls, in ms (default 1000). */
  progressEveryMs?: number;
}

/**
 * The request body of an upload. Text, bytes, a Blob and an array of rows
 * can be sent again on a retry; streams and other iterables once.
 */
export function uploadBody(rows: RowsUpload, progress: UploadProgressOptions = {}): Upload {
  let failed: { error: unknown } | null = null;
  const failure = () => failed;
  const meter = sentMeter(progress, !isEncoded(rows));
  const stream = (chunks: Iterable<string | Uint8Array> | AsyncIterable<string | Uint8Array>) =>
    streamOf(
      chunks,
      (error) => {
        failed = { error };
      },
      meter,
    );
  if (isEncoded(rows)) {
    const { body } = rows;
    const contentType = CONTENT_TYPES[rows.format];
    if (typeof body === "string" || body instanceof Uint8Array || body instanceof Blob) {
      const size = body instanceof Blob ? body.size : typeof body === "string" ? encodedLength(body) : body.byteLength;
      return { contentType, open: () => meter.whole(size, 0, body as BodyInit), replayable: true, failure };
    }
    if (body instanceof ReadableStream) {
      return { contentType, open: () => meter.counted(body), replayable: false, failure };
    }
    return { contentType, open: () => stream(body), replayable: false, failure };
  }
  if (Array.isArray(rows)) {
    const open = () => {
      const text = rows.map(ndjsonLine).join("");
      return meter.whole(encodedLength(text), rows.length, text);
    };
    return { contentType: CONTENT_TYPES.ndjson, open, replayable: true, failure };
  }
  return {
    contentType: CONTENT_TYPES.ndjson,
    open: () => stream(mapped(rows, ndjsonLine)),
    replayable: false,
    failure,
  };
}

/** Counts what is sent and tells `onProgress`, on the wall clock; does nothing without a listener. */
function sentMeter(options: UploadProgressOptions, rowsKnown: boolean) {
  const { onProgress } = options;
  const everyMs = Math.max(0, options.progressEveryMs ?? 1000);
  let bytes = 0;
  let rows = 0;
  let reportedAt = Date.now();
  const report = (done: boolean) => {
    if (typeof onProgress !== "function") return;
    const now = Date.now();
    if (!done && now - reportedAt < everyMs) return;
    reportedAt = now;
    try {
      onProgress({ bytes, rows: rowsKnown ? rows : null, done });
    } catch {
      // A listener's failure is not the upload's.
    }
  };
  return {
    /** One chunk (a row, for rows the client encodes) sent. */
    sent(size: number) {
      bytes += size;
      rows++;
      report(false);
    },
    end: () => report(true),
    /** A body in hand, reported once as it is handed over. */
    whole<B>(size: number, count: number, body: B): B {
      bytes = size;
      rows = count;
      report(true);
      return body;
    },
    /** A stream of the caller's, counted as it is read. */
    counted(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
      if (typeof onProgress !== "function") return body;
      return body.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, controller) {
            bytes += chunk.byteLength;
            report(false);
            controller.enqueue(chunk);
          },
          flush: () => report(true),
        }),
      );
    },
  };
}

function encodedLength(text: string): number {
  return new TextEncoder().encode(text).byteLength;
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
function streamOf(
  chunks: Iterable<string | Uint8Array> | AsyncIterable<string | Uint8Array>,
  onError: (error: unknown) => void,
  meter: ReturnType<typeof sentMeter>,
): ReadableStream<Uint8Array> {
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
      if (next.done) {
        controller.close();
        meter.end();
        return;
      }
      const bytes = typeof next.value === "string" ? encoder.encode(next.value) : next.value;
      controller.enqueue(bytes);
      meter.sent(bytes.byteLength);
    },
    async cancel() {
      await iterator.return?.();
    },
  });
}
