/** The Node adapter around a handle() that answers a fixed reply: the adapter's own cost. */
import { createServer } from "node:http";
import type { ApiReply } from "../../src/http/types.js";
import { built, type NodeAdapter } from "./built.js";

const { toNodeHandler } = await built<NodeAdapter>("adapters/node.js");

const body = process.env.BODY ?? '{"kind":"api-key"}';
const few = process.env.FEW === "1";
createServer(
  toNodeHandler({
    handle: async (): Promise<ApiReply> => ({
      status: 200,
      headers: few
        ? ({ "content-type": "application/json; charset=utf-8" } as Record<string, string>)
        : {
            "content-type": "application/json; charset=utf-8",
            "access-control-allow-origin": "*",
            "access-control-expose-headers": "X-Request-Id",
            "x-request-id": crypto.randomUUID(),
          },
      body,
    }),
  }),
).listen(Number(process.env.PORT), "127.0.0.1", () => console.log("ready"));
