/** A bare node:http server that reads the body, JSON.parses it and answers 200. */
import { createServer } from "node:http";

createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const value = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    const body = JSON.stringify({ ok: true, received: typeof value });
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
    res.end(body);
  });
}).listen(Number(process.env.PORT), "127.0.0.1", () => console.log("ready"));
