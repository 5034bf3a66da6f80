import { describe, it } from "vitest";
import { writeAdapterFixture } from "./_fixture.js";
import { describeAdapter } from "./_tests.js";
import { runtimeBinary, startProcess } from "./_utils.js";

const deno = runtimeBinary("deno");

/** What `examples/deno/server.ts` needs: the sources import `./x.js` for `./x.ts` (sloppy imports), net, the fixture, env. */
export const DENO_ARGS = ["run", "--sloppy-imports", "--allow-net", "--allow-read", "--allow-env"];

if (deno.runnable) {
  describeAdapter("deno", () =>
    startProcess("deno", deno.bin, [...DENO_ARGS, "examples/deno/server.ts", "--fixture", writeAdapterFixture(), "--port", "0"]),
  );
} else {
  console.warn(`[adapters] SKIPPED the Deno adapter suite: the deno binary cannot run here (${deno.reason})`);
  describe("adapter: deno", () => it.skip(`deno cannot run on this machine: ${deno.reason}`));
}
