import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { afterAll, describe, expect, it } from "vitest";
import { diagnosticsIn } from "./support/typecheck.js";

/**
 * Every TypeScript example in README.md and docs/ is type-checked against the
 * source, with `dataport` and its subpaths mapped to src/ as the package
 * exports them, so an example cannot drift from the API it shows. The
 * compiler options are those `tsc --init` writes (strict, exact optional
 * property types, unchecked indexed access, verbatim module syntax), so an
 * example that compiles here compiles in a new user's project. The other
 * blocks are run by test/readme-examples.test.ts.
 */
const root = join(import.meta.dirname, "..");
const out = join(root, "test", ".docs-check");

/** README.md and every page of docs/, as paths from the root. */
function pages(): string[] {
  return [
    "README.md",
    ...readdirSync(join(root, "docs"))
      .filter((f) => f.endsWith(".md"))
      .sort()
      .map((f) => `docs/${f}`),
  ];
}

function examples(): Array<{ name: string; code: string }> {
  const found: Array<{ name: string; code: string }> = [];
  for (const page of pages()) {
    const text = readFileSync(join(root, page), "utf8");
    let n = 0;
    // Fences may be indented (inside a list item): the code is dedented by the fence's indent.
    for (const match of text.matchAll(/^( *)```ts\n([\s\S]*?)^ *```$/gm)) {
      const indent = match[1]!.length;
      const code = match[2]!
        .split("\n")
        .map((line) => line.slice(Math.min(indent, line.length - line.trimStart().length)))
        .join("\n");
      found.push({ name: `${page.replace(/^docs\//, "").replace(/\.md$/, "")}-${++n}`, code });
    }
  }
  return found;
}

const SUBPATHS: Record<string, string> = {
  dataport: "src/index.ts",
  "dataport/node": "adapters/node.ts",
  "dataport/bun": "adapters/bun.ts",
  "dataport/deno": "adapters/deno.ts",
  "dataport/client": "src/client/index.ts",
  "dataport/admin-client": "src/admin-client/index.ts",
  "dataport/memory": "src/memory/index.ts",
  "dataport/sqlite": "src/sqlite/index.ts",
  "dataport/postgres": "src/postgres/index.ts",
  "dataport/redis": "src/redis/index.ts",
  "dataport/metrics": "src/metrics/index.ts",
  "dataport/testing": "src/testing/index.ts",
};

describe("TypeScript examples in README.md and docs/", () => {
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it("type-check against the library", () => {
    const blocks = examples();
    // README's client and mounting examples, and every page that shows code.
    expect(blocks.filter((b) => b.name.startsWith("README-")).length).toBeGreaterThanOrEqual(2);
    expect(blocks.length).toBeGreaterThan(20);
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
      // What `tsc --init` sets besides strict: examples must compile in a new project.
      exactOptionalPropertyTypes: true,
      noUncheckedIndexedAccess: true,
      verbatimModuleSyntax: true,
      isolatedModules: true,
      moduleDetection: ts.ModuleDetectionKind.Force,
      noEmit: true,
      skipLibCheck: true,
      allowImportingTsExtensions: true,
      baseUrl: root,
      paths: Object.fromEntries(Object.entries(SUBPATHS).map(([name, file]) => [name, [file]])),
    });
    const problems = diagnosticsIn(program, (name) => name.startsWith(out)).map(
      (d) => `${d.file!.fileName.slice(out.length + 1)}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`,
    );
    expect(problems).toEqual([]);
  }, 60_000);
});
