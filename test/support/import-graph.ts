import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";

/**
 * The import graph of the TypeScript files under `root`: file → the files it
 * imports, by path relative to `root`. Every kind of import counts — value
 * and `import type`, `export … from`, `import("…")` in types and in code —
 * because a type import closes a circle for a reader as much as a value
 * import does. Imports of packages (no leading `.`) are left out.
 */
export function importGraph(root: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(root)) {
    const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
    const targets = new Set<string>();
    const add = (specifier: string) => {
      const target = resolveImport(file, specifier);
      if (target !== null) targets.add(relative(root, target));
    };
    const visit = (node: ts.Node): void => {
      if (
        (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
        node.moduleSpecifier &&
        ts.isStringLiteral(node.moduleSpecifier)
      ) {
        add(node.moduleSpecifier.text);
      } else if (
        ts.isImportTypeNode(node) &&
        ts.isLiteralTypeNode(node.argument) &&
        ts.isStringLiteral(node.argument.literal)
      ) {
        add(node.argument.literal.text);
      } else if (
        ts.isCallExpression(node) &&
        node.expression.kind === ts.SyntaxKind.ImportKeyword &&
        node.arguments[0] &&
        ts.isStringLiteral(node.arguments[0])
      ) {
        add(node.arguments[0].text);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
    graph.set(relative(root, file), [...targets].sort());
  }
  return graph;
}

/**
 * The folder graph of a file graph: each top folder of `root` (a file at
 * the top stands for itself, `index.ts`) → the other top folders it imports,
 * with the file imports that make each arrow (`"domain/days.ts -> base/clock.ts"`).
 */
export function folderGraph(graph: Map<string, string[]>): Map<string, Map<string, string[]>> {
  const folders = new Map<string, Map<string, string[]>>();
  const folderOf = (file: string) => file.split("/")[0]!;
  for (const [file, targets] of graph) {
    const from = folderOf(file);
    const arrows = folders.get(from) ?? new Map<string, string[]>();
    folders.set(from, arrows);
    for (const target of targets) {
      const to = folderOf(target);
      if (to === from) continue;
      arrows.set(to, [...(arrows.get(to) ?? []), `${file} -> ${target}`]);
    }
  }
  return folders;
}

/**
 * The circles of a graph: every strongly connected component of more than one file (or a file importing itself), each
 * sorted.
 */
export function importCycles(graph: Map<string, string[]>): string[][] {
  // Tarjan's algorithm, iterative so a deep graph cannot overflow the stack.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const cycles: string[][] = [];
  let next = 0;
  for (const start of graph.keys()) {
    if (index.has(start)) continue;
    const work: { node: string; edge: number }[] = [{ node: start, edge: 0 }];
    index.set(start, next);
    low.set(start, next++);
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const frame = work[work.length - 1]!;
      const edges = graph.get(frame.node) ?? [];
      if (frame.edge < edges.length) {
        const to = edges[frame.edge++]!;
        if (!index.has(to)) {
          index.set(to, next);
          low.set(to, next++);
          stack.push(to);
          onStack.add(to);
          work.push({ node: to, edge: 0 });
        } else if (onStack.has(to)) {
          low.set(frame.node, Math.min(low.get(frame.node)!, index.get(to)!));
        }
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low.set(parent.node, Math.min(low.get(parent.node)!, low.get(frame.node)!));
      if (low.get(frame.node) === index.get(frame.node)) {
        const component: string[] = [];
        let member: string;
        do {
          member = stack.pop()!;
          onStack.delete(member);
          component.push(member);
        } while (member !== frame.node);
        if (component.length > 1 || (graph.get(frame.node) ?? []).includes(frame.node)) cycles.push(component.sort());
      }
    }
  }
  return cycles;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

/** `./x.js` from a file → `x.ts` (or `x/index.ts`) beside it; null for a package or a file that is not TypeScript. */
function resolveImport(from: string, specifier: string): string | null {
  if (!specifier.startsWith(".")) return null;
  const base = resolve(dirname(from), specifier);
  const candidates = [base.replace(/\.js$/, ".ts"), base, `${base}.ts`, join(base, "index.ts")];
  return candidates.find((path) => path.endsWith(".ts") && existsSync(path)) ?? null;
}
