import { promisify } from "node:util";
import zlib from "node:zlib";
import { withCoding } from "./conditional.js";
import type { HeaderReader } from "../base/headers.js";
import type { ApiReply, ReplyBody } from "./types.js";

/**
 * Answers compressed by the client's `Accept-Encoding`: brotli or gzip, for
 * bodies worth it — a whole body of at least `minBytes`, or any streamed one
 * (a large page, a download) — of a text type (JSON, NDJSON, CSV, HTML, …).
 * Every answer that could be compressed says `Vary: Accept-Encoding`; a tiny
 * one (a `/me`, a webhook receipt) is left as it is and costs one comparison.
 *
 * node:zlib (which Bun and Deno provide too), not the Web `CompressionStream`:
 * it sets the level, and measured on a 1,000-row page and a 20,000-row NDJSON
 * download it was 2 to 4 times faster (docs/performance.md, "Compression").
 * A whole body is compressed off the event loop (zlib's thread pool); a
 * streamed one chunk by chunk as the client takes it.
 */
export interface Compression {
  /** Whole bodies shorter than this many bytes (string length, for text) are sent as they are. */
  minBytes: number;
}

export type ContentCoding = "br" | "gzip";

/** What `Accept-Encoding` prefers among the codings offered (br on a tie), or null for none of them. */
export function chooseCoding(acceptEncoding: string | null): ContentCoding | null {
  if (acceptEncoding === null || acceptEncoding === "") return null;
  let br = -1;
  let gzip = -1;
  let other = -1;
  for (const part of acceptEncoding.split(",")) {
    const [name = "", ...params] = part.split(";");
    const coding = name.trim().toLowerCase();
    let q = 1;
    for (const param of params) {
      const [key, value] = param.split("=");
      if (key?.trim().toLowerCase() === "q") q = Number(value);
    }
    if (!(q >= 0 && q <= 1)) continue;
    if (coding === "br") br = q;
    else if (coding === "gzip" || coding === "x-gzip") gzip = q;
    else if (coding === "*") other = q;
  }
  if (br < 0) br = other;
  if (gzip < 0) gzip = other;
  if (br <= 0 && gzip <= 0) return null;
  return br >= gzip ? "br" : "gzip";
}

/**
 * The reply as the client's `Accept-Encoding` wants it: compressed (a promise
 * for a whole body, which is compressed off the event loop), or the reply
 * itself when it is not worth it or not asked for.
 */
export function compressReply(
  reply: ApiReply,
  request: HeaderReader,
  options: Compression,
): ApiReply | Promise<ApiReply> {
  const { body, headers, status } = reply;
  if (body === null) return reply;
  const whole = typeof body === "string" || body instanceof Uint8Array;
  if (whole && (typeof body === "string" ? body.length : body.byteLength) < options.minBytes) return reply;
  if (status < 200 || status >= 300 || status === 204 || "content-encoding" in headers) return reply;
  if (!isCompressible(headers["content-type"])) return reply;
  headers.vary = headers.vary ? `${headers.vary}, Accept-Encoding` : "Accept-Encoding";
  const coding = chooseCoding(request.get("accept-encoding"));
  if (coding === null) return reply;
  headers["content-encoding"] = coding;
  if (headers.etag !== undefined) headers.etag = withCoding(headers.etag, coding);
  delete headers["content-length"];
  if (!whole) return { status, headers, body: compressedStream(body, coding) };
  const bytes = typeof body === "string" ? Buffer.from(body, "utf8") : body;
  return compressWhole(bytes, coding).then((compressed) => ({ status, headers, body: compressed }));
}

/**
 * Media types worth compressing: text and the JSON family. Images, archives and the rest are left alone,
 * and so are event streams, whose events must reach the client as they are written, not when a block fills.
 */
function isCompressible(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  return /^(?:text\/(?!event-stream)|application\/(?:json|x-ndjson|javascript|xml|geo\+json)|[^;]*\+json)/i.test(
    contentType,
  );
}

/** Brotli quality of whole bodies: 4 made a 1,000-row page 41 % smaller than gzip level 1 in about the same time. */
const BROTLI_WHOLE = 4;
/** Brotli quality of streamed bodies: 1 was faster than gzip level 1 and 20 % smaller on a download. */
const BROTLI_STREAM = 1;
/** gzip level: 1 keeps most of the gain (a 1,000-row page 7.5× smaller) for the least CPU. */
const GZIP_LEVEL = 1;

const brotli = promisify(zlib.brotliCompress);
const gzip = promisify(zlib.gzip);

function compressWhole(bytes: Uint8Array, coding: ContentCoding): Promise<Uint8Array> {
  if (coding === "gzip") return gzip(bytes, { level: GZIP_LEVEL });
  return brotli(bytes, {
    params: {
      [zlib.constants.BROTLI_PARAM_QUALITY]: BROTLI_WHOLE,
      [zlib.constants.BROTLI_PARAM_SIZE_HINT]: bytes.byteLength,
    },
  });
}

/**
 * A streamed body through a compressor: each chunk is compressed as the
 * client asks for more (its source read no faster), and what the compressor
 * holds back is flushed at the end. A client that goes away closes the
 * source, as with an uncompressed stream.
 */
async function* compressedStream(
  body: Exclude<ReplyBody, string | Uint8Array | null>,
  coding: ContentCoding,
): AsyncGenerator<Uint8Array> {
  const stream =
    coding === "gzip"
      ? zlib.createGzip({ level: GZIP_LEVEL })
      : zlib.createBrotliCompress({ params: { [zlib.constants.BROTLI_PARAM_QUALITY]: BROTLI_STREAM } });
  const out: Buffer[] = [];
  stream.on("data", (chunk: Buffer) => out.push(chunk));
  const settled = new Promise<void>((resolve, reject) => {
    stream.once("end", resolve);
    stream.once("error", reject);
  });
  // A failure also reaches the write that met it; this promise is awaited only at the end.
  settled.catch(() => {});
  try {
    for await (const chunk of body) {
      await write(stream, chunk);
      if (out.length > 0) yield Buffer.concat(out.splice(0));
    }
    stream.end();
    await settled;
    if (out.length > 0) yield Buffer.concat(out.splice(0));
  } finally {
    stream.destroy();
  }
}

/** One chunk through the compressor, resolved once the compressor has taken it in. */
function write(stream: zlib.Gzip | zlib.BrotliCompress, chunk: string | Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    stream.write(chunk, (error) => (error ? reject(error) : resolve()));
  });
}
