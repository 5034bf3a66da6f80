/**
 * The example host on Node:
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npx tsx examples/host/main.ts [--port 8788] [--host 127.0.0.1]
 */
import { parseArgs } from "node:util";
import { createHostApp } from "./app.js";

const { values } = parseArgs({
  options: { port: { type: "string", default: "8788" }, host: { type: "string", default: "127.0.0.1" } },
});
const connectionString = process.env.DATABASE_URL;
if (!connectionString) {
  console.error("set DATABASE_URL to a PostgreSQL database, e.g. postgres://postgres@127.0.0.1:5432/test");
  process.exit(1);
}
const port = Number(values.port);
const appUrl = `http://${values.host}:${port}`;

const host = await createHostApp({ connectionString, dataApi: { appUrl, viewUrl: appUrl } });
const server = host.app.listen(port, values.host, () => console.log(`example host listening on ${appUrl}`));
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    host.api.drain();
    server.close(() => void host.close().then(() => process.exit(0)));
  });
}
