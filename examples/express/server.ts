/**
 * Dataport inside an Express application, on Node:
 *
 *   npx tsx examples/express/server.ts [--fixture FILE] [--port 8787] [--host 127.0.0.1]
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { createExampleApi, parseExampleArgs, runExample } from "../shared/options.js";
import { createExpressApp } from "./app.js";

await runExample("node", "npx tsx examples/express/server.ts", async () => {
  const options = parseExampleArgs(
    process.argv.slice(2),
    fileURLToPath(new URL("../demo/space.json", import.meta.url)),
  );
  const api = await createExampleApi(options, (path) => readFileSync(path, "utf8"));
  const server = createExpressApp(api).listen(options.port, options.host, () => {
    const address = server.address();
    const port = typeof address === "object" && address ? address.port : options.port;
    console.log(`dataport (express) listening on http://${options.host}:${port}`);
  });
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => server.close(() => process.exit(0)));
});
