import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { testFixture, TOKENS } from "../support/fixture.js";

export { TOKENS };

/** Rows in the large dataset: enough that every runtime streams the read in many chunks. */
export const BIG_ROWS = 30_000;
export const WEBHOOK_ENDPOINT = "hook_adapters";

/** The test fixture plus a large dataset and a webhook connection the sync key may read. */
export function adapterFixture() {
  const fixture = testFixture() as ReturnType<typeof testFixture> & Record<string, any>;
  const copy = structuredClone(fixture) as Record<string, any>;
  copy.connections.push({
    id: "conn_hook",
    teamId: "team_ops",
    name: "Adapter hook",
    type: "webhook",
    config: { endpointId: WEBHOOK_ENDPOINT, signingSecret: null },
    createdAt: "2026-09-01T00:00:00Z",
  });
  copy.datasets.push(
    {
      id: "ds_big",
      teamId: "team_ops",
      name: "Big",
      type: "upload",
      connectionId: null,
      source: null,
      columns: [
        { name: "n", type: "number" },
        { name: "label", type: "string" },
        { name: "even", type: "boolean" },
      ],
      rows: Array.from({ length: BIG_ROWS }, (_, n) => ({ n, label: `row number ${n}`, even: n % 2 === 0 })),
      lastRefreshedAt: null,
      updatedAt: "2026-10-02T10:00:00Z",
    },
    {
      id: "ds_hook",
      teamId: "team_ops",
      name: "Adapter hook rows",
      type: "connection",
      connectionId: "conn_hook",
      source: null,
      columns: [],
      rows: [],
      lastRefreshedAt: null,
      updatedAt: "2026-09-01T00:00:00Z",
    },
  );
  const sync = copy.apiKeys.find((k: { token: string }) => k.token === TOKENS.sync);
  sync.allowlist.datasets.push("ds_big", "ds_hook");
  sync.allowlist.connections.push("conn_hook");
  return copy;
}

/** The fixture as a file, for the example servers' `--fixture`. */
export function writeAdapterFixture(): string {
  const dir = mkdtempSync(join(tmpdir(), "dataport-adapters-"));
  const file = join(dir, "space.json");
  writeFileSync(file, JSON.stringify(adapterFixture()));
  return file;
}
