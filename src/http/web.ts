/**
 * The Web-standard edge: `api.fetch` wraps a Request as the pipeline's
 * ApiRequest and turns its ApiReply into a Response.
 */
import { payloadTooLarge, readLimited } from "./body.js";
import type { ApiReply, ApiRequest, ReplyBody } from "./types.js";

/** Wrap a Web Request as an ApiRequest. */
export function fromWebRequest(request: Request, clientAddress: string | null): ApiRequest {
  return {
    method: request.method,
    url: request.url,
    headers: request.headers,
    signal: request.signal,
    clientAddress,
    async readBody(limit) {
      if (!request.body) return new Uint8Array(0);
      const reader = request.body.getReader();
      const chunks = {
        async *[Symbol.asyncIterator]() {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) return;
            yield value;
          }
        },
      };
      return readLimited(chunks, limit, () => void reader.cancel().catch(() => {}));
    },
    async *streamBody(limit) {
      if (!request.body) return;
      const reader = request.body.getReader();
      let size = 0;
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) return;
          size += value.byteLength;
          if (size > limit) throw payloadTooLarge(limit);
          yield value;
        }
      } finally {
        // Stopped early (an error, a refusal, a consumer that gave up): let the sender go.
        void reader.cancel().catch(() => {});
      }
    },
  };
}

const encoder = new TextEncoder();

/** Turn an ApiReply into a Web Response; a streamed body becomes a ReadableStream that stops its source on cancel. */
export function toWebResponse(reply: ApiReply): Response {
  return new Response(toBodyInit(reply.body), { status: reply.status, headers: reply.headers });
}

function toBodyInit(body: ReplyBody): BodyInit | null {
  if (body === null || typeof body === "string") return body;
  if (body instanceof Uint8Array) return body as Uint8Array<ArrayBuffer>;
  const iterator = body[Symbol.asyncIterator]();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await iterator.next();
      if (done) controller.close();
      else controller.enqueue(typeof value === "string" ? encoder.encode(value) : value);
    },
    async cancel() {
      await iterator.return?.();
    },
  });
}
