import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { toNodeHandler } from "../../adapters/node.js";
import { createExampleApi, parseExampleArgs } from "../../examples/shared/options.js";
import { writeAdapterFixture } from "./_fixture.js";
import { describeAdapter } from "./_tests.js";

// In-process: the same API the Bun and Deno example servers build, behind node:http.
describeAdapter("node", async () => {
  const options = parseExampleArgs(["--fixture", writeAdapterFixture(), "--port", "0"], "");
  const api = await createExampleApi(options, (path) => readFileSync(path, "utf8"));
  const server = createServer(toNodeHandler(api));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    name: "node",
    url: `http://127.0.0.1:${port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
});
