import { readdirSync, readFileSync } from "node:fs";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";

const dir = new URL("../../src/sqlite/", import.meta.url);
const sources = readdirSync(dir)
  .filter((name) => name.endsWith(".ts"))
  .map((name) => ({ name, text: readFileSync(new URL(name, dir), "utf8") }));

describe("the SQLite store's SQL", () => {
  it("binds every LIMIT as `+?`, so a new limit value does not recompile the statement (src/sqlite/db.ts)", () => {
    // A bare `LIMIT ?` in SQL text or a template (`LIMIT ${…}`, rendered as `?`); comments aside.
    const isCode = (line: string) => !/^\s*(\*|\/\/|\/\*)/.test(line);
    const bare = sources.flatMap(({ name, text }) =>
      text
        .split("\n")
        .flatMap((line, i) =>
          isCode(line) && /LIMIT (\?|\$\{)/.test(line) ? [`${name}:${i + 1}: ${line.trim()}`] : [],
        ),
    );
    expect(bare).toEqual([]);
    // The scan reads the store's statements: 15 bound limits in seven files (a plain page is bounded by its positions).
    const bound = sources.flatMap(({ text }) =>
      text.split("\n").filter((line) => isCode(line) && /LIMIT \+(\?|\$\{)/.test(line)),
    );
    expect(bound).toHaveLength(15);
  });

  it("`LIMIT +?` limits as `LIMIT ?` does, by the bound value each time", () => {
    const db = new Database(":memory:");
    db.exec("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)");
    const insert = db.prepare("INSERT INTO t VALUES (?, ?)");
    for (let k = 1; k <= 10; k++) insert.run(k, `v${k}`);
    const page = db
      .prepare<[number, number, number, number], string>(
        "SELECT v FROM t WHERE k > ? AND k < ? ORDER BY k LIMIT +? OFFSET ?",
      )
      .pluck();
    expect(page.all(2, 9, 3, 0)).toEqual(["v3", "v4", "v5"]);
    expect(page.all(2, 9, 2, 1)).toEqual(["v4", "v5"]);
    expect(page.all(0, 11, 100, 8)).toEqual(["v9", "v10"]);
    expect(page.all(0, 11, -1, 7)).toEqual(["v8", "v9", "v10"]);
    db.close();
  });
});
