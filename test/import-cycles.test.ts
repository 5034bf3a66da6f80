import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { importCycles, importGraph } from "./support/import-graph.js";

const src = fileURLToPath(new URL("../src", import.meta.url));

describe("the import graph of src/", () => {
  it("has no circle, type imports included", () => {
    expect(importCycles(importGraph(src))).toEqual([]);
  });

  it("sees every kind of import: a circle closed by a type import, an export-from or an import() is found", () => {
    const graph = importGraph(src);
    // The graph is read, not assumed: the API imports its pipeline, and a type import is an edge.
    expect(graph.get("core/api.ts")).toContain("core/pipeline.ts");
    expect(graph.get("core/routing.ts")).toContain("context/handler.ts"); // `import type` only
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
