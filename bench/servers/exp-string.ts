import { createServer } from "node:http";
const body = process.env.BODY ?? "{}";
createServer((_req, res) => {
  res.writeHead(200, { "content-type": "application/json; charset=utf-8", "content-length": String(Buffer.byteLength(body)) });
  res.end(body);
}).listen(Number(process.env.PORT), "127.0.0.1", () => console.log("ready"));
