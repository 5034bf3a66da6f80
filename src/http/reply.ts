import type { ReplyBody } from "./types.js";

/** The content type of every JSON answer. */
export const JSON_CONTENT_TYPE = "application/json; charset=utf-8";

/**
 * What a handler returns when a plain 200 JSON body is not enough: another
 * status, extra headers, or a streamed body. Handlers never build Responses.
 * A Reply owns its `headers` object: the core adds CORS and request-id
 * headers to it in place, so never pass a shared object.
 */
export class Reply {
  constructor(
    readonly status: number,
    readonly body: ReplyBody,
    readonly headers: Record<string, string> = {},
  ) {}

  static json(status: number, value: unknown, headers: Record<string, string> = {}): Reply {
    return new Reply(status, JSON.stringify(value), { "content-type": JSON_CONTENT_TYPE, ...headers });
  }

  /** JSON already serialised. */
  static jsonText(status: number, text: string, headers: Record<string, string> = {}): Reply {
    return new Reply(status, text, { "content-type": JSON_CONTENT_TYPE, ...headers });
  }

  /**
   * `jsonText` taking over `headers`, a fresh object the caller hands over: the content type is added to it, nothing is
   * copied.
   */
  static adoptJsonText(status: number, text: string, headers: Record<string, string>): Reply {
    headers["content-type"] = JSON_CONTENT_TYPE;
    return new Reply(status, text, headers);
  }

  /** A JSON document produced piece by piece (large row reads). */
  static jsonStream(chunks: AsyncIterable<string>, headers: Record<string, string> = {}): Reply {
    return new Reply(200, chunks, { "content-type": JSON_CONTENT_TYPE, ...headers });
  }
}
