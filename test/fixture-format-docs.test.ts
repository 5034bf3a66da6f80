import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { fixtureSchema } from "../src/fixture/schema.js";

/**
 * docs/fixture-format.md describes every collection of the fixture, the
 * history items among them, with a table per collection that must list
 * exactly the fields of the zod schema, in its order, each required or with
 * the default the schema gives it: a field added to the format cannot go
 * undocumented, and a host in any language reads the shapes there.
 */
const page = readFileSync(join(import.meta.dirname, "..", "docs", "fixture-format.md"), "utf8");

/** The rows of the first table under the heading `### \`name\``. */
function fieldTable(collection: string): string[][] {
  const lines = page.split("\n");
  const start = lines.indexOf(`### \`${collection}\``);
  if (start < 0) throw new Error(`docs/fixture-format.md has no section ### \`${collection}\``);
  const first = lines.findIndex((line, i) => i > start && line.startsWith("|"));
  const rows: string[][] = [];
  for (let i = first + 2; i < lines.length && lines[i]!.startsWith("|"); i++)
    rows.push(
      lines[i]!.slice(1, -1)
        .split("|")
        .map((cell) => cell.trim()),
    );
  return rows;
}

const collections = Object.keys(fixtureSchema.shape).filter((key) => key !== "version") as Array<
  Exclude<keyof typeof fixtureSchema.shape, "version">
>;

describe("docs/fixture-format.md", () => {
  it("covers every collection, the four history collections among them", () => {
    expect(collections).toEqual(
      expect.arrayContaining(["dashboardViews", "refreshRuns", "creditUsage", "auditEvents"]),
    );
    expect(collections.length).toBe(13);
  });

  for (const collection of collections) {
    it(`lists every field of ${collection}, in order, required or with its default`, () => {
      const item = fixtureSchema.shape[collection].unwrap().element as z.ZodObject;
      const rows = fieldTable(collection);
      expect(rows.map(([field]) => field!.replace(/`/g, ""))).toEqual(Object.keys(item.shape));
      for (const [field, required] of rows) {
        const schema = item.shape[field!.replace(/`/g, "")] as z.ZodType;
        const missing = schema.safeParse(undefined);
        if (required === "yes") {
          expect(missing.success, `${collection}.${field} is required`).toBe(false);
          continue;
        }
        expect(missing.success, `${collection}.${field} may be left out`).toBe(true);
        // A default shown as a JSON literal (`null`, `[]`, `"success"`) is the schema's; "absent" stays absent.
        const literal = /^`([^`]+)`$/.exec(required!);
        if (literal) expect(missing.data, `${collection}.${field}'s default`).toEqual(JSON.parse(literal[1]!));
        else if (required === "absent") expect(missing.data).toBeUndefined();
      }
    });
  }
});
