import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { afterAll, describe, expect, it } from "vitest";

/**
 * Every TypeScript example in docs/ is type-checked against the source, with
 * `dataport` and its subpaths mapped to src/ as the package exports them, so
 * an example cannot drift from the API it shows.
 */
const root = join(import.meta.dirname, "..");
const out = join(root, "test", ".docs-check");

function examples(): Array<{ name: string; code: string }> {
  const found: Array<{ name: string; code: string }> = [];
  for (const file of readdirSync(join(root, "docs")).filter((f) => f.endsWith(".md"))) {
    const text = readFileSync(join(root, "docs", file), "utf8");
    let n = 0;
    for (const match of text.matchAll(/```ts\n([\s\S]*?)```/g)) found.push({ name: `${file.replace(/\.md$/, "")}-${++n}`, code: match[1]! });
  }
  return found;
}

const SUBPATHS: Record<string, string> = {
  dataport: "src/index.ts",
  "dataport/node": "adapters/node.ts",
  "dataport/bun": "adapters/bun.ts",
  "dataport/deno": "adapters/deno.ts",
  "dataport/client": "src/client/index.ts",
  "dataport/memory": "src/memory/index.ts",
  "dataport/sqlite": "src/sqlite/index.ts",
  "dataport/postgres": "src/postgres/index.ts",
  "dataport/redis": "src/redis/index.ts",
  "dataport/metrics": "src/metrics/index.ts",
  "dataport/testing": "src/testing/index.ts",
};

describe("examples in docs/", () => {
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it("type-check against the library", () => {
    const blocks = examples();
    expect(blocks.length).toBeGreaterThan(0);
    mkdirSync(out, { recursive: true });
    // Each block is a module of its own (top-level await allowed).
    const files = blocks.map(({ name, code }) => {
      const path = join(out, `${name}.ts`);
      writeFileSync(path, `${code}\nexport {};\n`);
      return path;
    });
    const program = ts.createProgram(files, {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      lib: ["lib.es2023.d.ts", "lib.dom.d.ts"],
      types: ["node"],
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      allowImportingTsExtensions: true,
      baseUrl: root,
      paths: Object.fromEntries(Object.entries(SUBPATHS).map(([name, file]) => [name, [file]])),
    });
    const problems = ts
      .getPreEmitDiagnostics(program)
      .filter((d) => d.file?.fileName.startsWith(out))
      .map((d) => `${d.file!.fileName.slice(out.length + 1)}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`);
    expect(problems).toEqual([]);
  }, 60_000);
});
