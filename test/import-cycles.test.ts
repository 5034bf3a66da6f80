import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { folderGraph, importCycles, importGraph } from "./support/import-graph.js";

const src = fileURLToPath(new URL("../src", import.meta.url));

/**
 * The floors of src/, the ground first (docs/development.md, "Layout"). A folder imports
 * only folders on floors below its own, or on its own floor without a circle. A new folder
 * takes the floor its imports give it, and is added here.
 */
const FLOORS: readonly (readonly string[])[] = [
  ["base", "peers", "client"], // what every floor may import; peers and client import nothing of src/
  ["domain"], // pure rules and the records' types
  ["ports"], // the interfaces with their guarantees
  ["http", "fixture"], // bodies, queries, replies; the space fixture
  ["schemas", "storage"], // the response schemas; what the core does around any store
  ["sql"], // what the SQL stores share: the builder and its dialects, group commit, the store-call wrapper
  ["memory", "sqlite", "postgres", "redis", "metrics", "connectors"], // the ports' implementations
  ["core"], // what a handler calls per request: authentication, access, the upstream guard, caches, limits
  ["context"], // what a handler receives
  ["handlers", "admin"], // the work of each endpoint
  ["routes"], // the route table, what a route is, the OpenAPI document
  ["server"], // createDataApi, the pipeline, the router, the request observer
  ["testing", "admin-client", "index.ts"], // the conformance suites, the admin client, the public entry point
];

/** Imports allowed to run up the floors, as `"from/file.ts -> to/file.ts"`: none. */
const UPWARD_IMPORTS: readonly string[] = [];

const floorOf = (folder: string) => FLOORS.findIndex((floor) => floor.includes(folder));

describe("the import graph of src/", () => {
  it("has no circle, type imports included", () => {
    expect(importCycles(importGraph(src))).toEqual([]);
  });

  it("sees every kind of import: a circle closed by a type import, an export-from or an import() is found", () => {
    const graph = importGraph(src);
    // The graph is read, not assumed: the API imports its pipeline, and a type import is an edge.
    expect(graph.get("server/api.ts")).toContain("server/pipeline.ts");
    expect(graph.get("routes/route-def.ts")).toContain("context/handler.ts"); // `import type` only
    expect(graph.get("routes/index.ts")).toContain("routes/webhooks.ts"); // also `export … from`
    // A circle of three and one of two, beside a file outside both.
    const circles = importCycles(
      new Map([
        ["a.ts", ["b.ts"]],
        ["b.ts", ["c.ts"]],
        ["c.ts", ["a.ts", "d.ts"]],
        ["d.ts", ["e.ts"]],
        ["e.ts", ["d.ts"]],
        ["f.ts", ["a.ts"]],
      ]),
    );
    expect(circles.map((c) => c.join(" ")).sort()).toEqual(["a.ts b.ts c.ts", "d.ts e.ts"]);
    expect(importCycles(new Map([["self.ts", ["self.ts"]]]))).toEqual([["self.ts"]]);
  });
});

describe("the folders of src/", () => {
  const folders = folderGraph(importGraph(src));

  it("each stand on one floor", () => {
    const present = readdirSync(src).sort();
    const placed = FLOORS.flat();
    expect(
      present.filter((folder) => floorOf(folder) === -1),
      "folders on no floor",
    ).toEqual([]);
    expect(
      placed.filter((folder) => !present.includes(folder)),
      "floors naming a folder that is gone",
    ).toEqual([]);
    expect(new Set(placed).size).toBe(placed.length);
  });

  it("import each other in one direction: no folder circle", () => {
    const arrows = new Map([...folders].map(([folder, to]) => [folder, [...to.keys()].sort()]));
    expect(importCycles(arrows)).toEqual([]);
  });

  it("import only their own floor or those below, but for the documented imports", () => {
    const upward = [...folders].flatMap(([from, to]) =>
      [...to].filter(([folder]) => floorOf(folder) > floorOf(from)).flatMap(([, imports]) => imports),
    );
    expect(upward.sort()).toEqual([...UPWARD_IMPORTS].sort());
    expect(UPWARD_IMPORTS.length).toBeLessThanOrEqual(2);
  });

  it("are listed floor by floor in docs/development.md", () => {
    const page = readFileSync(new URL("../docs/development.md", import.meta.url), "utf8");
    const layout = page.slice(page.indexOf("## Layout"), page.indexOf("\n## ", page.indexOf("## Layout") + 1));
    const listed: string[][] = [];
    for (const row of layout.split("\n").filter((line) => line.startsWith("| ") && !line.startsWith("| floor"))) {
      const [floor, where] = row.split(" | ");
      if (floor !== "|") listed.push([]);
      listed.at(-1)?.push(...[...where!.matchAll(/`src\/([\w-]+(?:\.ts)?)\/?`/g)].map((m) => m[1]!));
    }
    expect(listed).toEqual(FLOORS);
  });

  it("are read from the imports: the folder graph keeps each arrow's file imports and finds a circle", () => {
    const graph = folderGraph(
      new Map([
        ["index.ts", ["server/api.ts"]],
        ["server/api.ts", ["server/pipeline.ts", "base/api-error.ts"]],
        ["server/pipeline.ts", ["base/api-error.ts"]],
        ["base/api-error.ts", ["base/awaitable.ts"]],
        ["base/awaitable.ts", ["server/api.ts"]],
      ]),
    );
    expect(Object.fromEntries([...graph].map(([folder, to]) => [folder, Object.fromEntries(to)]))).toEqual({
      "index.ts": { server: ["index.ts -> server/api.ts"] },
      server: { base: ["server/api.ts -> base/api-error.ts", "server/pipeline.ts -> base/api-error.ts"] },
      base: { server: ["base/awaitable.ts -> server/api.ts"] },
    });
    const arrows = new Map([...graph].map(([folder, to]) => [folder, [...to.keys()]]));
    expect(importCycles(arrows)).toEqual([["base", "server"]]);
    // `domain/` importing `ports/` runs upward.
    expect(floorOf("ports")).toBeGreaterThan(floorOf("domain"));
  });
});
