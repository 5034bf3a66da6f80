import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { createClient, type DataportClient, type TableRow } from "../src/client/index.js";
import { setup } from "./support/api.js";
import { TOKENS } from "./support/fixture.js";

const root = join(import.meta.dirname, "..");
const out = join(root, "test", ".changes-docs");
afterAll(() => rmSync(out, { recursive: true, force: true }));

/** The `mirror.ts` block of docs/changes.md, as a module importing the client from the source. */
async function mirrorModule(): Promise<{
  mirrorTable: (dp: DataportClient, id: string, copy: Map<string, TableRow>, signal: AbortSignal) => Promise<void>;
}> {
  const page = readFileSync(join(root, "docs", "changes.md"), "utf8");
  const block = [...page.matchAll(/^```ts\n([\s\S]*?)^```$/gm)]
    .map((m) => m[1]!)
    .find((code) => code.startsWith("// mirror.ts"));
  if (!block) throw new Error("docs/changes.md has no mirror.ts block");
  mkdirSync(out, { recursive: true });
  const file = join(out, "mirror.ts");
  writeFileSync(
    file,
    block.replace('from "dataport/client"', `from ${JSON.stringify(join(root, "src", "client", "index.js"))}`),
  );
  return import(pathToFileURL(file).href);
}

describe("docs/changes.md: the mirror example", () => {
  it("ends with an exact copy of a table written while it follows", async () => {
    const { mirrorTable } = await mirrorModule();
    const { api } = await setup();
    const dp = createClient({ baseUrl: "http://dataport.test/api/v1", token: TOKENS.sync, fetch: api.fetch });
    const copy = new Map<string, TableRow>();
    const controller = new AbortController();
    const mirroring = mirrorTable(dp, "tbl_targets", copy, controller.signal);
    // Writers insert, update and delete while the mirror reads and follows.
    const writer = async (name: string) => {
      const ids: string[] = [];
      for (let i = 0; i < 15; i++) {
        ids.push((await dp.tables.insert("tbl_targets", { region: `${name}${i}`, target: i }))._id);
        if (i % 3 === 2) await dp.tables.update("tbl_targets", ids[i - 1]!, { target: 100 + i });
        if (i % 5 === 4) await dp.tables.delete("tbl_targets", ids[i - 3]!);
      }
    };
    await Promise.all([writer("A"), writer("B"), dp.tables.delete("tbl_targets", "row_1")]);
    const final = new Map<string, TableRow>();
    for await (const row of dp.tables.iterateRows("tbl_targets")) final.set(row._id, row);
    // The mirror catches up with the last writes (a long-poll answers at once when a change is written).
    for (let i = 0; i < 100 && JSON.stringify([...copy].sort()) !== JSON.stringify([...final].sort()); i++)
      await new Promise((r) => setTimeout(r, 20));
    controller.abort();
    await mirroring;
    expect(final.size).toBe(2 * 15 - 2 * 3);
    expect(new Map([...copy].sort())).toEqual(new Map([...final].sort()));
  });
});
