import { createServer } from "node:http";
const body = process.env.BODY ?? "{}";
let n = 0;
createServer((_req, res) => {
  res.writeHead(200, { "content-type": "application/json; charset=utf-8", "access-control-allow-origin": "*", "access-control-expose-headers": "X-Request-Id", "x-request-id": "0ab74d05bd457e0e-" + (++n).toString(36), "content-length": String(Buffer.byteLength(body)) });
  res.end(body);
}).listen(Number(process.env.PORT), "127.0.0.1", () => console.log("ready"));
