import { describe, it } from "vitest";
import { writeAdapterFixture } from "./_fixture.js";
import { describeAdapter } from "./_tests.js";
import { runtimeBinary, startProcess } from "./_utils.js";

const bun = runtimeBinary("bun");

if (bun.runnable) {
  describeAdapter("bun", () => startProcess("bun", bun.bin, ["examples/bun/server.ts", "--fixture", writeAdapterFixture(), "--port", "0"]));
} else {
  console.warn(`[adapters] SKIPPED the Bun adapter suite: the bun binary cannot run here (${bun.reason})`);
  describe("adapter: bun", () => it.skip(`bun cannot run on this machine: ${bun.reason}`));
}
