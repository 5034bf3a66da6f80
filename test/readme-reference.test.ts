import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { usage } from "../examples/server/cli.js";
import { createDataApi, DEFAULT_SETTINGS } from "../src/server/api.js";
import { parseFixture } from "../src/fixture/load.js";
import { createMemoryStorage } from "../src/memory/memory-storage.js";
import { createPrometheusMetrics } from "../src/metrics/index.js";
import { createOpenApiDocument } from "../src/routes/openapi-document.js";
import { ERROR_CODES } from "../src/schemas/common.js";

/**
 * The reference tables of docs/ that list what the code defines — error
 * codes, createDataApi options and their defaults, the example server's
 * flags, the columns of each space object, the Prometheus series, the
 * operationIds — must list exactly that, so a new option or column cannot
 * go undocumented and a removed one cannot linger.
 */
const root = join(import.meta.dirname, "..");
const page = (path: string) => readFileSync(join(root, path), "utf8");

/** The text of a page from a heading to the next heading of the same or a higher level. */
function section(text: string, heading: string): string {
  const lines = text.split("\n");
  const start = lines.findIndex((line) => line.startsWith("#") && line.includes(heading));
  if (start < 0) throw new Error(`no heading ${heading}`);
  const level = /^#+/.exec(lines[start]!)![0].length;
  const end = lines.findIndex((line, i) => i > start && new RegExp(`^#{1,${level}} `).test(line));
  return lines.slice(start + 1, end < 0 ? undefined : end).join("\n");
}

/** The cells of a section's first Markdown table, header and rule left out. */
function tableRows(text: string): string[][] {
  const lines = text.split("\n");
  const first = lines.findIndex((line) => line.startsWith("|"));
  const rows: string[][] = [];
  for (let i = first + 2; i < lines.length && lines[i]!.startsWith("|"); i++) {
    rows.push(
      lines[i]!.slice(1, -1)
        .split(/(?<!\\)\|/)
        .map((cell) => cell.trim()),
    );
  }
  return rows;
}

const codesIn = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);

describe("reference tables in docs/", () => {
  it("authentication-and-errors.md lists every error code, once", () => {
    const rows = tableRows(section(page("docs/authentication-and-errors.md"), "The error envelope"));
    const codes = rows.map((row) => codesIn(row[1]!)[0]);
    expect([...codes].sort()).toEqual([...ERROR_CODES].sort());
    for (const row of rows) expect(row[0], row[1]).toMatch(/^[45]\d\d$/);
  });

  it("mounting.md lists every createDataApi option, with the defaults the code has", () => {
    const rows = tableRows(section(page("docs/mounting.md"), "Options of `createDataApi`"));
    const documented = rows.flatMap((row) => codesIn(row[0]!));
    const source = page("src/server/api.ts");
    const body = source.slice(
      source.indexOf("export interface DataApiOptions"),
      source.indexOf("\n}\n", source.indexOf("export interface DataApiOptions")),
    );
    const ports = [...body.matchAll(/^ {2}(\w+)\?:/gm)].map((m) => m[1]!);
    expect(ports.length).toBeGreaterThan(5);
    expect([...documented].sort()).toEqual([...ports, ...Object.keys(DEFAULT_SETTINGS)].sort());

    const units: Record<string, number> = { KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 };
    for (const row of rows) {
      for (const name of codesIn(row[0]!)) {
        if (!(name in DEFAULT_SETTINGS)) continue;
        const actual = DEFAULT_SETTINGS[name as keyof typeof DEFAULT_SETTINGS];
        const shown = row[1]!;
        if (typeof actual === "number") {
          const match = /^([\d,]+(?:\.\d+)?)\s*(KiB|MiB|GiB)?/.exec(shown);
          expect(match, `${name}: default ${shown}`).not.toBeNull();
          expect(
            Number(match![1]!.replace(/,/g, "")) * (units[match![2] ?? ""] ?? 1),
            `${name}: default ${shown}`,
          ).toBe(actual);
        } else if (typeof actual === "string") expect(shown, name).toContain(actual);
        else if (typeof actual === "boolean") expect(shown, name).toMatch(new RegExp(`^${actual}\\b`));
        else expect(shown, `${name}: default ${JSON.stringify(actual)}`).toMatch(/^none\b/);
      }
    }
  });

  it("operating.md lists every flag of the example server", () => {
    const rows = tableRows(section(page("docs/operating.md"), "The example server"));
    const documented = rows.flatMap((row) => [...row[0]!.matchAll(/--[a-z-]+/g)].map((m) => m[0]));
    const flags = [...new Set([...usage("npm start").matchAll(/--[a-z-]+/g)].map((m) => m[0]))];
    expect(flags.length).toBeGreaterThan(15);
    expect([...documented].sort()).toEqual(flags.sort());
  });

  it("operating.md lists every Prometheus series", () => {
    const rows = tableRows(section(page("docs/operating.md"), "Metrics (Prometheus)"));
    const documented = rows.map((row) => codesIn(row[0]!)[0]);
    const series = createPrometheusMetrics()
      .registry.getMetricsAsArray()
      .map((metric) => metric.name);
    expect([...documented].sort()).toEqual([...series].sort());
  });

  it("dashboards-and-space.md gives each space object's columns, in order, with their types", async () => {
    const storage = createMemoryStorage();
    await storage.seed(parseFixture(JSON.parse(page("examples/demo/space.json"))));
    const api = createDataApi({ storage });
    const text = page("docs/dashboards-and-space.md");
    const objects = [...text.matchAll(/^### `([a-z-]+)` — /gm)].map((m) => m[1]!);
    expect(objects).toEqual([
      "dashboard-usage",
      "refresh-history",
      "credit-usage",
      "api-usage",
      "dataset-usage",
      "webhook-deliveries",
    ]);
    for (const object of objects) {
      const res = await api.fetch(
        new Request(`http://127.0.0.1:8787/api/v1/space/${object}`, {
          headers: { authorization: "Bearer dp_demo_full_access_0000000000001" },
        }),
      );
      expect(res.status, object).toBe(200);
      const { columns } = (await res.json()) as { columns: Array<{ name: string; type: string }> };
      const rows = tableRows(section(text, `\`${object}\``));
      expect(
        rows.map((row) => codesIn(row[0]!)[0]),
        object,
      ).toEqual(columns.map((c) => c.name));
      expect(
        rows.map((row) => /^\w+/.exec(row[1]!)![0]),
        `${object} types`,
      ).toEqual(columns.map((c) => c.type));
    }
  });

  it("openapi.md names every operationId of the document", () => {
    const document = createOpenApiDocument(createDataApi().routes) as {
      paths: Record<string, Record<string, { operationId?: string }>>;
    };
    const ids = Object.values(document.paths).flatMap((item) =>
      Object.values(item).flatMap((op) => (op && typeof op === "object" && op.operationId ? [op.operationId] : [])),
    );
    expect(ids.length).toBeGreaterThan(15);
    const text = page("docs/openapi.md");
    expect(ids.filter((id) => !text.includes(`\`${id}\``))).toEqual([]);
  });
});
