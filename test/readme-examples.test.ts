import { execFile } from "node:child_process";
import * as fs from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { z } from "zod";
import { HelpRequested, parseServerArgs } from "../examples/server/cli.js";
import { type RunningServer, startServer } from "../examples/server/server.js";
import { parseExampleArgs } from "../examples/shared/options.js";
import { createDataApi } from "../src/server/api.js";
import { parseFixture } from "../src/fixture/load.js";
import { createJsonLogger } from "../src/server/logging.js";
import { createMemoryStorage } from "../src/memory/memory-storage.js";

/**
 * Every code block of README.md and docs/ that is not TypeScript (those are
 * type-checked by test/docs.test.ts) runs here, so an example cannot go stale:
 *
 * - ```sh blocks are read as the shell would (variables, quotes, backslash
 *   continuations, `$(…)` run by bash) and each command is run or checked:
 *   - `curl` is sent to the example server, started in-process on the demo
 *     space as `npm start -- --db :memory:` starts it (a fresh one per page;
 *     `--app-url http://127.0.0.1:8787`, so the URLs it builds are the ones the
 *     docs show). The answer must be a 2xx, or the status its output comment
 *     names (`# 404 {…}`, `# HTTP/1.1 201 Created`); every `"key":value` the
 *     comment shows with a complete value must be in the answer, every header
 *     it shows (after `curl -i`) among the headers, and after `| grep X` the
 *     comment's lines among the answer's lines. An output comment is the run
 *     of `#` lines right after a command; `…` marks what is not compared.
 *   - `npm start -- FLAGS` and `npx dataport FLAGS` must be flags the example
 *     server takes; in a block that also sends requests, the block's server is
 *     started with them. npm scripts must exist, files named to `npx tsx`,
 *     `npx vitest run`, `npx bun`, `npx deno run` must exist, `npm run bench`
 *     words must name scenarios, `npm install` names known packages.
 *   - anything else fails: teach this test, or write the example differently.
 * - ```json blocks name what they are after the language: a component schema
 *   of the OpenAPI document (```json DatasetRowsPage: parsed by that zod
 *   schema, which must keep every field), `fixture` (arrays added to the demo
 *   fixture, which must still load) or `LogLines` (the keys the JSON logger writes).
 */
const root = join(import.meta.dirname, "..");
const DEMO_FIXTURE = join(root, "examples/demo/space.json");
const DOCS_ORIGIN = "http://127.0.0.1:8787";

interface Block {
  page: string;
  /** 1-based line of the opening fence. */
  line: number;
  lang: string;
  info: string;
  code: string;
}

function pages(): string[] {
  return [
    "README.md",
    ...fs
      .readdirSync(join(root, "docs"))
      .filter((f) => f.endsWith(".md"))
      .sort()
      .map((f) => `docs/${f}`),
  ];
}

/** The fenced blocks of a page, dedented by their fence's indent. */
function blocksOf(page: string): Block[] {
  const lines = fs.readFileSync(join(root, page), "utf8").split("\n");
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^( *)```(\S*)(?: +(.*))?$/.exec(lines[i]!);
    if (!open) continue;
    const indent = open[1]!.length;
    const body: string[] = [];
    let j = i + 1;
    while (j < lines.length && !/^ *```\s*$/.test(lines[j]!)) body.push(lines[j++]!.slice(indent));
    if (j === lines.length) throw new Error(`${page}:${i + 1}: a code block is not closed`);
    blocks.push({ page, line: i + 1, lang: open[2]!, info: (open[3] ?? "").trim(), code: body.join("\n") });
    i = j;
  }
  return blocks;
}

const ALL = pages().flatMap(blocksOf);

// ---------------------------------------------------------------- the shell

/** A word as written: parts that are literal, or expanded ($VAR, ${VAR}, $(…)). */
type Part = { kind: "text"; text: string } | { kind: "var"; name: string } | { kind: "subst"; command: string };
type Token = { kind: "word"; parts: Part[] } | { kind: "op"; op: "|" | "&&" | ";" | "&" };

/** Shell tokens of one logical line; a `#` starting a word ends the line. */
function tokenize(line: string, where: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  const fail = (why: string): never => {
    throw new Error(`${where}: ${why} in: ${line}`);
  };
  const readVar = (parts: Part[]) => {
    // at "$"
    if (line[i + 1] === "(") {
      let depth = 0;
      let j = i + 1;
      let quote: string | null = null;
      for (; j < line.length; j++) {
        const c = line[j]!;
        if (quote) {
          if (c === quote) quote = null;
          else if (c === "\\" && quote === '"') j++;
        } else if (c === "'" || c === '"') quote = c;
        else if (c === "(") depth++;
        else if (c === ")" && --depth === 0) break;
      }
      if (j >= line.length) fail("an unclosed $(");
      parts.push({ kind: "subst", command: line.slice(i + 2, j) });
      i = j + 1;
      return;
    }
    const braced =
      /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}/.exec(line.slice(i)) ?? /^\$([A-Za-z_][A-Za-z0-9_]*)/.exec(line.slice(i));
    if (!braced) fail("a $ this test does not read");
    parts.push({ kind: "var", name: braced![1]! });
    i += braced![0].length;
  };
  while (i < line.length) {
    const c = line[i]!;
    if (c === " " || c === "\t") {
      i++;
      continue;
    }
    if (c === "#") break;
    if (c === "|" || c === ";" || c === "&") {
      const op = line.startsWith("&&", i) ? "&&" : (c as "|" | ";" | "&");
      if (line.startsWith("||", i)) fail("|| is not read");
      tokens.push({ kind: "op", op });
      i += op.length;
      continue;
    }
    if (c === "<" || c === ">" || c === "`" || c === "(" || c === ")") fail(`${c} is not read`);
    const parts: Part[] = [];
    while (i < line.length && !/[\s|;&<>]/.test(line[i]!)) {
      const d = line[i]!;
      if (d === "'") {
        const end = line.indexOf("'", i + 1);
        if (end < 0) fail("an unclosed '");
        parts.push({ kind: "text", text: line.slice(i + 1, end) });
        i = end + 1;
      } else if (d === '"') {
        i++;
        let text = "";
        while (i < line.length && line[i] !== '"') {
          if (line[i] === "\\" && /["\\$`]/.test(line[i + 1] ?? "")) {
            text += line[i + 1];
            i += 2;
          } else if (line[i] === "$") {
            if (text) parts.push({ kind: "text", text });
            text = "";
            readVar(parts);
          } else text += line[i++];
        }
        if (i >= line.length) fail('an unclosed "');
        if (text) parts.push({ kind: "text", text });
        parts.push({ kind: "text", text: "" }); // "" is a word even when empty
        i++;
      } else if (d === "$") readVar(parts);
      else if (d === "\\") {
        parts.push({ kind: "text", text: line[i + 1] ?? "" });
        i += 2;
      } else {
        parts.push({ kind: "text", text: d });
        i++;
      }
    }
    // Adjacent literal parts as one (`curl` is one part, as a word written in one piece).
    const merged: Part[] = [];
    for (const part of parts) {
      const last = merged.at(-1);
      if (part.kind === "text" && last?.kind === "text")
        merged[merged.length - 1] = { kind: "text", text: last.text + part.text };
      else merged.push(part);
    }
    tokens.push({ kind: "word", parts: merged });
  }
  return tokens;
}

interface Command {
  /** Where it is written, for messages. */
  where: string;
  source: string;
  tokens: Token[];
  /** The `#` lines right after it, without the `#`. */
  output: string[];
}

/** A block's commands: backslash continuations joined, comments and blank lines dropped, output comments attached. */
function commandsOf(block: Block): Command[] {
  const lines = block.code.split("\n");
  const commands: Command[] = [];
  for (let i = 0; i < lines.length; i++) {
    const first = lines[i]!;
    if (first.trim() === "" || first.trimStart().startsWith("#")) continue;
    const start = i;
    let source = first;
    while (/\\$/.test(source) && i + 1 < lines.length) source = `${source.slice(0, -1)} ${lines[++i]!.trim()}`;
    const where = `${block.page}:${block.line + 1 + start}`;
    const output: string[] = [];
    while (i + 1 < lines.length && lines[i + 1]!.trimStart().startsWith("#"))
      output.push(lines[++i]!.trimStart().replace(/^# ?/, ""));
    commands.push({ where, source, tokens: tokenize(source, where), output });
  }
  return commands;
}

/** Runs `$(…)` with bash, the block's variables in its environment. */
function runSubstitution(command: string, vars: Record<string, string>, origin: string | null): Promise<string> {
  const rewrite = (text: string) =>
    origin === null ? text : text.replace(/http:\/\/(?:127\.0\.0\.1|localhost):\d+/g, origin);
  const env = { ...process.env, ...Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, rewrite(v)])) };
  return new Promise((resolve, reject) => {
    execFile(
      "bash",
      ["-c", `set -o pipefail; ${rewrite(command)}`],
      { env, cwd: root, timeout: 10_000 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`$(${command}) failed: ${stderr || error.message}`));
        else resolve(stdout.replace(/\n+$/, ""));
      },
    );
  });
}

async function expand(
  parts: Part[],
  vars: Record<string, string>,
  origin: string | null,
  where: string,
): Promise<string> {
  let out = "";
  for (const part of parts) {
    if (part.kind === "text") out += part.text;
    else if (part.kind === "var") {
      const value = vars[part.name] ?? (part.name === "PWD" ? root : undefined);
      if (value === undefined) throw new Error(`${where}: $${part.name} is not set in this block`);
      out += value;
    } else out += await runSubstitution(part.command, vars, origin);
  }
  return out;
}

/** A pipeline's stages as expanded words, and the `&&`/`;` lists split apart. */
async function stagesOf(
  tokens: Token[],
  vars: Record<string, string>,
  origin: string | null,
  where: string,
): Promise<string[][][]> {
  const lists: string[][][] = [[[]]];
  for (const token of tokens) {
    const list = lists.at(-1)!;
    if (token.kind === "op") {
      if (token.op === "|") list.push([]);
      else if (token.op === "&") throw new Error(`${where}: & (background) is not read`);
      else lists.push([[]]);
    } else list.at(-1)!.push(await expand(token.parts, vars, origin, where));
  }
  return lists.filter((list) => list[0]!.length > 0);
}

// ------------------------------------------------------------ the commands

const pkg = JSON.parse(fs.readFileSync(join(root, "package.json"), "utf8")) as {
  scripts: Record<string, string>;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
};
const KNOWN_PACKAGES = new Set([
  "dataport",
  ...Object.keys({ ...pkg.dependencies, ...pkg.devDependencies, ...pkg.peerDependencies }),
]);
// bench/run.ts and the scenario names it imports (bench/support.ts).
const BENCH = ["bench/run.ts", "bench/support.ts"].map((file) => fs.readFileSync(join(root, file), "utf8")).join("\n");
const SERVER_DEFAULTS = { fixture: DEMO_FIXTURE, db: ":memory:" };

function mustExist(path: string, where: string): void {
  if (!fs.existsSync(join(root, path))) throw new Error(`${where}: ${path} does not exist`);
}

/** The example server's flags: they must parse (`--help` too). */
function checkServerFlags(flags: string[], where: string): void {
  try {
    parseServerArgs(flags, SERVER_DEFAULTS);
  } catch (error) {
    if (!(error instanceof HelpRequested))
      throw new Error(`${where}: the example server refuses ${flags.join(" ")}: ${(error as Error).message}`);
  }
}

/** Flags of an `npm start` / `npx dataport` command, or null for another command. */
function serverFlags(words: string[]): string[] | null {
  if (words[0] === "npm" && words[1] === "start") return words[2] === "--" ? words.slice(3) : words.slice(2);
  if (words[0] === "npx" && words[1] === "dataport") return words.slice(2);
  return null;
}

/** Checks a command that is not sent anywhere: what it names must exist. */
function checkCommand(words: string[], where: string): void {
  const [name, sub, ...rest] = words;
  const flags = serverFlags(words);
  if (flags) return checkServerFlags(flags, where);
  if (name === "npm") {
    if (sub === "install" || sub === "i") {
      for (const p of rest.filter((w) => !w.startsWith("-")))
        if (!KNOWN_PACKAGES.has(p)) throw new Error(`${where}: npm install ${p}: not a dependency or peer of dataport`);
      return;
    }
    if (sub === "test" || sub === "pack" || sub === "ci") return;
    if (sub === "run") {
      const [script, dashes, ...args] = rest;
      if (!script || !(script in pkg.scripts)) throw new Error(`${where}: there is no npm script ${script}`);
      if (args.length > 0 && dashes !== "--") throw new Error(`${where}: arguments to npm run need --`);
      // bench/run.ts runs the scenarios (and scripts) whose name contains a word.
      if (script === "bench")
        for (const word of args)
          if (![`"${word}`, `\`${word}`, `bench/${word}`].some((s) => BENCH.includes(s)))
            throw new Error(`${where}: no bench scenario is named ${word}`);
      return;
    }
    throw new Error(`${where}: npm ${sub} is not a command this test knows`);
  }
  if (name === "npx") {
    if (sub === "vitest" && rest[0] === "run") return rest.slice(1).forEach((f) => mustExist(f, where));
    if (sub === "tsx") return mustExist(rest[0]!, where);
    if (sub === "bun") {
      mustExist(rest[0]!, where);
      parseExampleArgs(rest.slice(1), DEMO_FIXTURE);
      return;
    }
    if (sub === "deno" && rest[0] === "run") {
      const script = rest.slice(1).findIndex((w) => !w.startsWith("-"));
      mustExist(rest[1 + script]!, where);
      parseExampleArgs(rest.slice(2 + script), DEMO_FIXTURE);
      return;
    }
    if (sub && fs.existsSync(join(root, "node_modules/.bin", sub))) return;
    throw new Error(`${where}: npx ${sub} is not a command this test knows`);
  }
  if (name === "rm" && sub === "-rf" && rest.length === 1 && !rest[0]!.startsWith("/")) return;
  throw new Error(`${where}: ${words.join(" ")} is not a command this test knows`);
}

interface CurlRequest {
  method: string;
  url: string;
  headers: Headers;
  body: string | undefined;
  include: boolean;
}

function parseCurl(args: string[], where: string): CurlRequest {
  const headers = new Headers();
  const data: string[] = [];
  let method: string | undefined;
  let url: string | undefined;
  let get = false;
  let include = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const value = () => {
      const next = args[++i];
      if (next === undefined) throw new Error(`${where}: curl ${arg} needs a value`);
      return next;
    };
    if (/^-[sSfiL]+$/.test(arg)) include ||= arg.includes("i");
    else if (arg === "--silent" || arg === "--show-error" || arg === "--fail") continue;
    else if (arg === "-X" || arg === "--request") method = value();
    else if (arg === "-H" || arg === "--header") {
      const header = value();
      const colon = header.indexOf(":");
      headers.append(header.slice(0, colon).trim(), header.slice(colon + 1).trim());
    } else if (arg === "-d" || arg === "--data" || arg === "--data-raw" || arg === "--data-binary") {
      const text = value();
      if (arg !== "--data-raw" && text.startsWith("@")) throw new Error(`${where}: curl -d @file is not read`);
      data.push(text);
    } else if (arg === "--data-urlencode") {
      const text = value();
      const eq = text.indexOf("=");
      data.push(
        eq < 0
          ? encodeURIComponent(text)
          : `${text.slice(0, eq)}${eq > 0 ? "=" : ""}${encodeURIComponent(text.slice(eq + 1))}`,
      );
    } else if (arg === "-G" || arg === "--get") get = true;
    else if (arg.startsWith("-")) throw new Error(`${where}: curl ${arg} is not read by this test`);
    else if (url === undefined) url = arg;
    else throw new Error(`${where}: curl with two URLs`);
  }
  if (url === undefined) throw new Error(`${where}: curl without a URL`);
  let body: string | undefined;
  if (data.length > 0) {
    if (get) url += (url.includes("?") ? "&" : "?") + data.join("&");
    else {
      body = data.join("&");
      if (!headers.has("content-type")) headers.set("content-type", "application/x-www-form-urlencoded");
    }
  }
  return { method: method ?? (body === undefined ? "GET" : "POST"), url, headers, body, include };
}

/** The `"key":value` pairs an output comment shows with a complete scalar value. */
function shownPairs(text: string): Array<{ key: string; value: unknown; source: string }> {
  const pairs: Array<{ key: string; value: unknown; source: string }> = [];
  const pattern =
    /"((?:[^"\\]|\\.)*)":\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)(?=\s*[,}\]])/g;
  for (const match of text.matchAll(pattern)) {
    if (match[0].includes("…")) continue;
    pairs.push({ key: JSON.parse(`"${match[1]!}"`) as string, value: JSON.parse(match[2]!), source: match[0] });
  }
  return pairs;
}

/** Whether `key` holds `value` in any object inside `json`. */
function holds(json: unknown, key: string, value: unknown): boolean {
  if (Array.isArray(json)) return json.some((item) => holds(item, key, value));
  if (json === null || typeof json !== "object") return false;
  const record = json as Record<string, unknown>;
  if (Object.hasOwn(record, key) && JSON.stringify(record[key]) === JSON.stringify(value)) return true;
  return Object.values(record).some((item) => holds(item, key, value));
}

async function sendCurl(
  args: string[],
  pipeline: string[][],
  output: string[],
  origin: string,
  where: string,
): Promise<void> {
  const request = parseCurl(args, where);
  const target = /^http:\/\/(?:127\.0\.0\.1|localhost):\d+(\/.*)?$/.exec(request.url);
  if (!target)
    throw new Error(
      `${where}: curl to ${request.url}: only the demo server (http://127.0.0.1:8787) is reached by this test`,
    );
  const response = await fetch(origin + (target[1] ?? "/"), {
    method: request.method,
    headers: request.headers,
    body: request.body ?? null,
    redirect: "manual",
  });
  const text = await response.text();
  const statusShown = output
    .map(
      (line) =>
        /^(?:→\s*)?(\d{3})(?:\s|$)/.exec(line)?.[1] ??
        (request.include ? /^HTTP\/[\d.]+ (\d{3})\b/.exec(line)?.[1] : undefined),
    )
    .find((s) => s !== undefined);
  const context = `${where}: ${request.method} ${request.url} answered ${response.status} ${text.slice(0, 300)}`;
  if (statusShown) expect(response.status, context).toBe(Number(statusShown));
  else expect(response.status >= 200 && response.status < 300, context).toBe(true);

  const headerLines = request.include ? output.filter((line) => /^[A-Za-z][A-Za-z0-9-]*: \S/.test(line)) : [];
  for (const line of headerLines) {
    const [name, ...value] = line.split(": ");
    const shown = value.join(": ");
    const actual = response.headers.get(name!);
    if (shown.includes("…")) expect(actual, `${where}: header ${name}`).not.toBeNull();
    else expect(actual, `${where}: header ${name}`).toBe(shown);
  }
  const rest = output.filter((line) => !headerLines.includes(line) && !/^HTTP\//.test(line));
  const greps = pipeline.slice(1);
  if (greps.length > 0) {
    let lines = text.split("\n");
    for (const stage of greps) {
      if (stage[0] !== "grep" || stage.length !== 2) throw new Error(`${where}: after curl only | grep WORD is read`);
      lines = lines.filter((line) => line.includes(stage[1]!));
    }
    expect(lines.length, `${context}\n(nothing matched the grep)`).toBeGreaterThan(0);
    for (const line of rest) expect(lines, `${where}: the output comment's line`).toContain(line);
    return;
  }
  const shown = rest.join("\n").replace(/^(?:→\s*)?\d{3}\s*/, "");
  if (shown.trim() === "") return;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new Error(`${context}\n(the output comment shows JSON, the answer is not)`);
  }
  for (const pair of shownPairs(shown))
    expect(holds(json, pair.key, pair.value), `${context}\n(the comment shows ${pair.source})`).toBe(true);
}

// ------------------------------------------------------------- the servers

const running: RunningServer[] = [];
afterAll(async () => {
  await Promise.all(running.splice(0).map((server) => server.close()));
});

/** The example server on the demo space, in memory, as `npm start -- --db :memory: FLAGS` starts it. */
async function demoServer(flags: string[] = []): Promise<RunningServer> {
  const config = parseServerArgs(
    [
      ...flags,
      "--db",
      ":memory:",
      "--port",
      "0",
      "--host",
      "127.0.0.1",
      "--log",
      "none",
      "--app-url",
      DOCS_ORIGIN,
      "--drain-timeout",
      "1",
    ],
    SERVER_DEFAULTS,
  );
  const server = await startServer(config, { fs, env: process.env });
  running.push(server);
  return server;
}

async function runBlock(block: Block, pageServer: () => Promise<RunningServer>): Promise<void> {
  const commands = commandsOf(block);
  const vars: Record<string, string> = {};
  const sends = commands.some((c) =>
    c.tokens.some(
      (t) => t.kind === "word" && t.parts.length === 1 && t.parts[0]!.kind === "text" && t.parts[0]!.text === "curl",
    ),
  );
  let server: RunningServer | null = null;
  for (const command of commands) {
    const origin = sends ? (server ??= await pageServer()).url : null;
    for (const pipeline of await stagesOf(command.tokens, vars, origin, command.where)) {
      let words = pipeline[0]!;
      // NAME=value … : assignments alone, or the environment of the command after them.
      const env: Record<string, string> = {};
      if (words[0] === "export") words = words.slice(1);
      while (words.length > 0 && /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[0]!)) {
        const [name, ...value] = words[0]!.split("=");
        env[name!] = value.join("=");
        words = words.slice(1);
      }
      if (words.length === 0) {
        Object.assign(vars, env);
        continue;
      }
      if (words[0] === "curl") {
        await sendCurl(words.slice(1), pipeline, command.output, (server ??= await pageServer()).url, command.where);
        continue;
      }
      if (pipeline.length > 1) throw new Error(`${command.where}: only curl may be piped`);
      checkCommand(words, command.where);
      const flags = serverFlags(words);
      if (flags && sends) {
        if (flags.some((f) => /^(postgres(ql)?|redis):/.test(f)))
          throw new Error(`${command.where}: a block that sends requests starts the server on the demo in memory only`);
        server = await demoServer(flags);
      }
    }
  }
}

// ------------------------------------------------------------------- JSON

/** Every named component schema: the zod schemas of src/schemas with `.meta({ id })`. */
async function namedSchemas(): Promise<Map<string, z.ZodType>> {
  const named = new Map<string, z.ZodType>();
  for (const file of fs.readdirSync(join(root, "src/schemas")).filter((f) => f.endsWith(".ts"))) {
    const module = (await import(`../src/schemas/${file.replace(/\.ts$/, ".js")}`)) as Record<string, unknown>;
    for (const value of Object.values(module)) {
      const schema = value as { meta?: () => { id?: string } | undefined; safeParse?: unknown };
      if (typeof schema?.meta === "function" && typeof schema.safeParse === "function") {
        const id = schema.meta()?.id;
        if (id) named.set(id, value as z.ZodType);
      }
    }
  }
  return named;
}

async function checkJson(block: Block, schemas: Map<string, z.ZodType>): Promise<void> {
  const where = `${block.page}:${block.line}`;
  if (block.info === "LogLines") return checkLogLines(block, where);
  let value: unknown;
  try {
    value = JSON.parse(block.code);
  } catch (error) {
    throw new Error(`${where}: not JSON (write a complete example, no …): ${(error as Error).message}`);
  }
  if (block.info === "fixture") {
    const demo = JSON.parse(fs.readFileSync(DEMO_FIXTURE, "utf8")) as Record<string, unknown[]>;
    for (const [key, items] of Object.entries(value as Record<string, unknown[]>))
      demo[key] = [...(demo[key] ?? []), ...items];
    const env = Object.fromEntries(
      [...block.code.matchAll(/\$\{([A-Z_][A-Z0-9_]*)\}/g)].map((m) => [m[1]!, "postgres://example.invalid/db"]),
    );
    expect(() => parseFixture(demo, { env }), where).not.toThrow();
    return;
  }
  const schema = schemas.get(block.info);
  if (!schema)
    throw new Error(
      `${where}: ${block.info ? `no schema is named ${block.info}` : "name the schema after json (```json DatasetRowsPage), or fixture, or LogLines"}`,
    );
  const parsed = schema.safeParse(value);
  expect(parsed.success ? [] : parsed.error.issues, `${where}: ${block.info}`).toEqual([]);
  // A field the schema does not know is dropped by parsing: the example shows one the API never sends.
  expect(parsed.data, `${where}: ${block.info} keeps every field`).toEqual(value);
}

/** The example log lines have the keys (and fixed values) the JSON logger writes. */
async function checkLogLines(block: Block, where: string): Promise<void> {
  const shown = block.code
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  const written: Array<Record<string, unknown>> = [];
  const logger = createJsonLogger({ write: (line) => written.push(JSON.parse(line)) });
  const storage = createMemoryStorage();
  await storage.seed(parseFixture(JSON.parse(fs.readFileSync(DEMO_FIXTURE, "utf8"))));
  const api = createDataApi({ storage, logger });
  await api.fetch(
    new Request(`${DOCS_ORIGIN}/api/v1/me`, { headers: { authorization: "Bearer dp_demo_full_access_0000000000001" } }),
  );
  logger.error("unexpected error", new Error("boom"), { requestId: "r-1" });
  const request = written.find((line) => line.msg === "request")!;
  const error = written.find((line) => line.level === "error")!;
  const shownRequest = shown.find((line) => line.msg === "request");
  const shownError = shown.find((line) => line.level === "error");
  expect(shownRequest, `${where}: a request line`).toBeDefined();
  expect(Object.keys(shownRequest!).sort(), `${where}: request line keys`).toEqual(Object.keys(request).sort());
  for (const key of ["level", "msg", "method", "route", "status", "errorCode", "credentialKind", "keyId", "userId"]) {
    expect(shownRequest![key], `${where}: request line ${key}`).toEqual(request[key]);
  }
  if (shownError) {
    expect(Object.keys(shownError).sort(), `${where}: error line keys`).toEqual(Object.keys(error).sort());
    expect(Object.keys(shownError.error as object).sort(), `${where}: error line's error keys`).toEqual(
      Object.keys(error.error as object).sort(),
    );
  }
}

// ------------------------------------------------------------------ tests

describe("code blocks of README.md and docs/", () => {
  it("are all of a kind that a test runs or type-checks", () => {
    const unknown = ALL.filter((b) => !(b.lang === "ts" || b.lang === "sh" || b.lang === "json")).map(
      (b) => `${b.page}:${b.line} \`\`\`${b.lang}`,
    );
    expect(unknown).toEqual([]);
    expect(ALL.filter((b) => b.page === "README.md" && b.lang === "sh").length).toBeGreaterThanOrEqual(3);
  });

  it("README shows the two commands a newcomer runs, and stays short", () => {
    const readme = fs.readFileSync(join(root, "README.md"), "utf8");
    expect(readme).toContain("npm install && npm start");
    expect(readme).toContain("npm install && npm test");
    expect(readme.split("\n").length).toBeLessThanOrEqual(400);
  });

  it("link to pages and files that exist", () => {
    const broken: string[] = [];
    for (const page of pages()) {
      const text = fs.readFileSync(join(root, page), "utf8");
      const dir = page.includes("/") ? page.slice(0, page.lastIndexOf("/") + 1) : "";
      for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = match[1]!;
        if (/^[a-z]+:/.test(target)) continue;
        const [path, anchor] = target.split("#");
        const file = path ? join(root, dir, path) : join(root, page);
        if (!fs.existsSync(file)) {
          broken.push(`${page}: ${target}`);
          continue;
        }
        if (anchor && file.endsWith(".md")) {
          const slugs = fs
            .readFileSync(file, "utf8")
            .split("\n")
            .filter((line) => /^#+ /.test(line))
            .map((line) =>
              line
                .replace(/^#+ /, "")
                .toLowerCase()
                .replace(/[^\p{L}\p{N} _-]/gu, "")
                .replace(/ /g, "-"),
            );
          if (!slugs.includes(anchor)) broken.push(`${page}: ${target} (no such heading)`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it("JSON examples are what the API sends, a loadable fixture, or the log's lines", async () => {
    const schemas = await namedSchemas();
    expect(schemas.has("DatasetRowsPage")).toBe(true);
    const json = ALL.filter((b) => b.lang === "json");
    expect(json.length).toBeGreaterThan(10);
    for (const block of json) await checkJson(block, schemas);
  });

  const shellPages = pages().filter((page) => ALL.some((b) => b.page === page && b.lang === "sh"));
  it.each(shellPages)(
    "shell examples of %s run against the demo",
    async (page) => {
      let server: Promise<RunningServer> | null = null;
      const pageServer = () => (server ??= demoServer());
      for (const block of ALL.filter((b) => b.page === page && b.lang === "sh")) await runBlock(block, pageServer);
    },
    30_000,
  );
});

describe("the shell reader of this test", () => {
  const block = (code: string): Block => ({ page: "t.md", line: 1, lang: "sh", info: "", code });

  it("joins continuations, attaches output comments and drops prose comments", () => {
    const commands = commandsOf(
      block('# prose\ncurl -s $API \\\n  -H "A: b"   # trailing\n# 404 {"x":1}\n\n# more prose\nK=v'),
    );
    expect(commands.map((c) => [c.source.replace(/\s+/g, " "), c.output])).toEqual([
      ['curl -s $API -H "A: b" # trailing', ['404 {"x":1}']],
      ["K=v", []],
    ]);
  });

  it("expands variables in double quotes and words, never in single quotes, and refuses unset ones", async () => {
    const [command] = commandsOf(block(`curl "$API/x?a=1" '$API' -d "{\\"k\\":\\"$V\\"}" \${API}/y`));
    const lists = await stagesOf(command!.tokens, { API: "http://h", V: "v" }, null, "t");
    expect(lists).toEqual([[["curl", "http://h/x?a=1", "$API", "-d", '{"k":"v"}', "http://h/y"]]]);
    await expect(stagesOf(command!.tokens, {}, null, "t")).rejects.toThrow("$API is not set");
  });

  it("runs $(…) with bash and splits pipelines and && lists", async () => {
    const [command] = commandsOf(block(`S=$(printf '%s' "$B" | tr a-z A-Z) && curl -s x | grep y`));
    const lists = await stagesOf(command!.tokens, { B: "abc" }, null, "t");
    expect(lists).toEqual([
      [["S=ABC"]],
      [
        ["curl", "-s", "x"],
        ["grep", "y"],
      ],
    ]);
  });

  it("reads curl as curl does: -G with --data-urlencode, -d as a form by default", () => {
    const get = parseCurl(
      ["-s", "-G", "http://127.0.0.1:8787/a", "--data-urlencode", 'filters={"a":1}', "--data-urlencode", "limit=1"],
      "t",
    );
    expect([get.method, get.url, get.body]).toEqual([
      "GET",
      "http://127.0.0.1:8787/a?filters=%7B%22a%22%3A1%7D&limit=1",
      undefined,
    ]);
    const form = parseCurl(["-X", "POST", "http://127.0.0.1:8787/b", "-d", "a=1", "-d", "b=2"], "t");
    expect([form.method, form.body, form.headers.get("content-type")]).toEqual([
      "POST",
      "a=1&b=2",
      "application/x-www-form-urlencoded",
    ]);
    expect(() => parseCurl(["--compressed", "http://x"], "t")).toThrow("curl --compressed is not read");
  });

  it("compares only complete values of an output comment", () => {
    expect(
      shownPairs('{"a":1,"b":"x…","c":{"d":true},"e":"q\\"r","f":null,"g":[1,2]}').map((p) => [p.key, p.value]),
    ).toEqual([
      ["a", 1],
      ["d", true],
      ["e", 'q"r'],
      ["f", null],
    ]);
    expect(holds({ x: [{ a: { b: 2 } }] }, "b", 2)).toBe(true);
    expect(holds({ x: [{ a: { b: 2 } }] }, "b", "2")).toBe(false);
  });

  it("refuses commands it does not know, and flags the example server refuses", () => {
    expect(() => checkCommand(["wget", "x"], "t")).toThrow("not a command this test knows");
    expect(() => checkCommand(["npm", "start", "--", "--no-such-flag"], "t")).toThrow("the example server refuses");
    expect(() => checkCommand(["npm", "run", "nope"], "t")).toThrow("there is no npm script nope");
    expect(() => checkCommand(["npx", "vitest", "run", "test/missing.test.ts"], "t")).toThrow("does not exist");
    expect(() => checkCommand(["npm", "install", "left-pad"], "t")).toThrow("not a dependency");
    expect(() => checkCommand(["npx", "dataport", "--help"], "t")).not.toThrow();
  });
});
