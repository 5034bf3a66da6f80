/** A bare node:http server answering the same bytes GET /api/v1/me returns. */
import { createServer } from "node:http";

const body = Buffer.from(process.env.BODY ?? "{}");
createServer((_req, res) => {
  res.writeHead(200, { "content-type": "application/json; charset=utf-8", "content-length": body.length });
  res.end(body);
}).listen(Number(process.env.PORT), "127.0.0.1", () => console.log("ready"));
