/**
 * Property-based fuzzing of the handler on every store (issue #17): generated
 * hostile path ids, query values and bodies. After every request: no 5xx,
 * the error envelope on every 4xx, nothing logged (no failed audit or usage
 * write), and after every refused write the store's invariants (row counts
 * of the free table and the webhook dataset unchanged, both still readable,
 * filtered reads included). At the end, Object.prototype is untouched.
 *
 * `npm test` runs a bounded number of cases; DATAPORT_FUZZ_RUNS=5000 runs
 * that many per property and store (README, "Tests"). DATAPORT_FUZZ_STATS=1
 * prints how often each status came back, to see how deep the cases reach.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeCursor } from "../../src/domain/cursor.js";
import {
  type Answer,
  counts,
  expectHandled,
  FREE_TABLE,
  HOOK,
  HOOK_DATASET,
  type HostileApi,
  hostileApi,
  type Opened,
  storeCases,
  TOKENS,
} from "./harness.js";

const RUNS = Number(process.env.DATAPORT_FUZZ_RUNS ?? 100);
/** Per property: generous, since a long run is RUNS cases of a few requests each. */
const TIMEOUT_MS = 20_000 + RUNS * 150;
/** Reproduce a failure with DATAPORT_FUZZ_SEED (fast-check prints the seed and path of a counterexample). */
const SEED = process.env.DATAPORT_FUZZ_SEED === undefined ? undefined : Number(process.env.DATAPORT_FUZZ_SEED);
const options = { numRuns: RUNS, ...(SEED !== undefined && { seed: SEED }) };
const STATS = process.env.DATAPORT_FUZZ_STATS === "1";

// ---------- text ----------

/** Code units that break stores or parsers: NUL, surrogate halves, controls, noncharacters, separators. */
const NASTY_UNITS = [
  0x00, 0x01, 0x08, 0x0a, 0x0d, 0x1f, 0x7f, 0x85, 0xa0, 0xad, 0x2028, 0x2029, 0xd800, 0xdbff, 0xdc00, 0xdfff, 0xfeff,
  0xfffe, 0xffff,
];

const unit = fc.oneof(
  { weight: 5, arbitrary: fc.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 1 }) },
  { weight: 3, arbitrary: fc.constantFrom(...NASTY_UNITS).map((c) => String.fromCharCode(c)) },
  { weight: 2, arbitrary: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)) },
  { weight: 1, arbitrary: fc.constantFrom("😀", "𝄞", "é", "ß", "\u0301", "🏳️‍🌈") },
);

const LITERALS = [
  "",
  ".",
  "..",
  "%2e%2e",
  "\u0000",
  "a\u0000b",
  "\ud800",
  "\udc00x",
  "x\ud83d",
  "😀",
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "'; DROP TABLE rows; --",
  "\\",
  "/",
  "?",
  "#",
  "%",
  "%ZZ",
  "%00",
  " ",
  "null",
  "true",
  "NaN",
  "x".repeat(5000),
];

/** Short strings mixing ordinary and nasty code units, or one of the classic literals. */
const hostileText = fc.oneof(
  { weight: 3, arbitrary: fc.array(unit, { maxLength: 12 }).map((units) => units.join("")) },
  { weight: 2, arbitrary: fc.constantFrom(...LITERALS) },
);

/**
 * Percent-encoding of every code unit outside the unreserved set, surrogate halves as their (invalid) three UTF-8
 * bytes.
 */
function percentEncode(text: string, keep: RegExp = /[A-Za-z0-9\-._~]/): string {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const ch = text[i]!;
    if (keep.test(ch)) out += ch;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      out += encodeURIComponent(text.slice(i, i + 2));
      i++;
    } else if (c >= 0xd800 && c <= 0xdfff) {
      out +=
        `%${(0xe0 | (c >> 12)).toString(16)}%${(0x80 | ((c >> 6) & 0x3f)).toString(16)}%${(0x80 | (c & 0x3f)).toString(16)}`.toUpperCase();
    } else out += encodeURIComponent(ch);
  }
  return out;
}

/** A path segment as a client could send it: encoded, raw (dots, slashes and all), or broken percent-encoding. */
const segment = fc.oneof(
  { weight: 4, arbitrary: hostileText.map((t) => percentEncode(t)) },
  { weight: 2, arbitrary: hostileText.map((t) => percentEncode(t, /[A-Za-z0-9\-._~/\\%]/)) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      "..",
      "%2e%2e",
      "%2E%2e",
      ".%2e",
      "%2e",
      ".",
      "%00",
      "%2f..%2f",
      "..%2f..",
      "%c0%ae%c0%ae",
      "%ZZ",
      "%",
      "%e0%80",
      "ds_orders",
      "tbl_free",
    ),
  },
  {
    weight: 1,
    arbitrary: fc
      .uint8Array({ minLength: 1, maxLength: 6 })
      .map((bytes) => [...bytes].map((b) => `%${b.toString(16).padStart(2, "0")}`).join("")),
  },
);

// ---------- JSON ----------

/** A JSON value as text, with leaves no serializer would write (1e400, \u0000 escapes, lone surrogate escapes). */
type Node = { raw: string } | Node[] | { entries: Array<[string, Node]> };

const numberLiteral = fc.oneof(
  fc.double().map((d) => (Number.isFinite(d) ? JSON.stringify(d) : "0")),
  fc.integer().map(String),
  fc.constantFrom(
    "1e400",
    "-1e400",
    "1E+999",
    "-0",
    "0.0",
    "1.7976931348623157e308",
    "5e-324",
    "1e-400",
    `1${"0".repeat(400)}`,
    "123456789012345678901234567890",
    "0e0",
  ),
);

const stringLiteral = fc.oneof(
  { weight: 3, arbitrary: hostileText.map((t) => JSON.stringify(t)) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '"\\u0000"',
      '"a\\u0000"',
      '"\\ud800"',
      '"\\udfff"',
      '"\\ud83d\\ude00"',
      '"\\\\u0000"',
      '"\\/"',
      '"\\ud800\\ud800"',
    ),
  },
);

const leaf: fc.Arbitrary<Node> = fc.oneof(
  numberLiteral.map((raw) => ({ raw })),
  stringLiteral.map((raw) => ({ raw })),
  fc.constantFrom("true", "false", "null").map((raw) => ({ raw })),
);

const key = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom("note", "event", "id", "amount", "a.b", "region", "target") },
  { weight: 2, arbitrary: hostileText },
);

const tree: fc.Arbitrary<Node> = fc.letrec<{ node: Node }>((tie) => ({
  node: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf,
    fc.array(tie("node"), { maxLength: 4 }),
    fc.array(fc.tuple(key, tie("node")), { maxLength: 4 }).map((entries) => ({ entries })),
  ),
})).node;

function text(node: Node): string {
  if ("raw" in node) return node.raw;
  if (Array.isArray(node)) return `[${node.map(text).join(",")}]`;
  return `{${node.entries.map(([k, v]) => `${JSON.stringify(k)}:${text(v)}`).join(",")}}`;
}

/** Wrap a value in `depth` levels of arrays or objects. */
const deep = (inner: string, depth: number, kind: "array" | "object") =>
  kind === "array"
    ? `${"[".repeat(depth)}${inner}${"]".repeat(depth)}`
    : `${'{"a":'.repeat(depth)}${inner}${"}".repeat(depth)}`;

/** A body: mostly JSON objects with hostile members, sometimes deep, sometimes not JSON at all. */
const body: fc.Arbitrary<string | Uint8Array> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.array(fc.tuple(key, tree), { minLength: 1, maxLength: 5 }).map((entries) => text({ entries })),
  },
  {
    weight: 3,
    arbitrary: fc
      .tuple(
        fc.oneof(fc.integer({ min: 55, max: 75 }), fc.integer({ min: 500, max: 20_000 })),
        fc.constantFrom<"array" | "object">("array", "object"),
        leaf,
      )
      .map(([depth, kind, inner]) => `{"note":${deep(text(inner), depth, kind)}}`),
  },
  { weight: 1, arbitrary: fc.jsonValue().map((v) => JSON.stringify(v)) },
  { weight: 1, arbitrary: tree.map(text) },
  {
    weight: 1,
    arbitrary: fc.constantFrom<string | Uint8Array>(
      "",
      "{",
      '{"a":1,}',
      '{"a":1}garbage',
      "\ufeff{}",
      '{"a":"\u0000"}',
      new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]),
      new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc0, 0x80, 0x22, 0x7d]),
      new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xed, 0xa0, 0x80, 0x22, 0x7d]),
      '{"__proto__":{"polluted":1},"constructor":{"prototype":{"polluted":1}}}',
      `{"big":"${"x".repeat(200_000)}"}`,
      `{${Array.from({ length: 2000 }, (_, i) => `"k${i}":${i}`).join(",")}}`,
    ),
  },
);

// ---------- queries ----------

const numberText = fc.oneof(
  fc.integer({ min: -5, max: 5 }).map(String),
  fc.constantFrom(
    "2147483647",
    "2147483648",
    "9007199254740993",
    "999999999999999",
    "9".repeat(30),
    "1e400",
    "1e3",
    "-0",
    "0x10",
    " 1",
    "1.5",
    "NaN",
    "Infinity",
    "",
    "+1",
    "01",
  ),
);

const queryValue = fc.oneof(
  { weight: 3, arbitrary: hostileText },
  // Audit cursors that pass their checksum but carry hostile positions and times.
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.option(hostileText), fc.option(hostileText))
      .map(([position, since]) => encodeCursor({ position, since })),
  },
  { weight: 3, arbitrary: numberText },
  { weight: 3, arbitrary: body.filter((b): b is string => typeof b === "string" && b.length < 50_000) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "ASC",
      "desc",
      "geojson",
      "json",
      "team_ops",
      "event",
      "event,_id",
      ",",
      "viewer",
      "day",
    ),
  },
);

const QUERY_KEYS = [
  "offset",
  "limit",
  "maxRows",
  "filters",
  "params",
  "columns",
  "orderBy",
  "orderDirection",
  "datasetId",
  "format",
  "teamId",
  "days",
  "by",
  "cursor",
  "since",
];
const queryKey = fc.oneof(
  { weight: 5, arbitrary: fc.constantFrom(...QUERY_KEYS) },
  { weight: 1, arbitrary: hostileText },
);
const query = fc
  .array(fc.tuple(queryKey, queryValue), { minLength: 1, maxLength: 4 })
  .map((pairs) => pairs.map(([k, v]) => `${percentEncode(k)}=${percentEncode(v)}`).join("&"));

const READ_ROUTES = [
  "/api/v1/datasets",
  "/api/v1/datasets/ds_orders/rows",
  `/api/v1/datasets/${HOOK_DATASET}/rows`,
  `/api/v1/tables/${FREE_TABLE}/rows`,
  "/api/v1/connections/conn_retail/query",
  "/api/v1/dashboards",
  "/api/v1/space/dataset-usage",
  "/api/v1/space/refresh-history",
  "/api/v1/space/api-usage",
  "/api/v1/audit",
];

// ---------- routes taking ids ----------

interface IdRoute {
  method: string;
  /** `{}` is replaced by the generated segment. */
  template: string;
  write: boolean;
  /**
   * The generated segment sits between this mount and another route's path: whatever it is, the request is never
   * served.
   */
  smuggle?: true;
}

const ID_ROUTES: IdRoute[] = [
  { method: "GET", template: "/api/v1/datasets/{}", write: false },
  { method: "GET", template: "/api/v1/datasets/{}/rows", write: false },
  { method: "GET", template: "/api/v1/tables/{}/rows", write: false },
  { method: "GET", template: "/api/v1/connections/{}/query", write: false },
  { method: "GET", template: "/api/v1/dashboards/{}/views", write: false },
  { method: "GET", template: "/api/v1/space/{}", write: false },
  { method: "POST", template: "/api/v1/tables/{}/rows", write: true },
  { method: "PATCH", template: `/api/v1/tables/${FREE_TABLE}/rows/{}`, write: true },
  { method: "DELETE", template: `/api/v1/tables/${FREE_TABLE}/rows/{}`, write: true },
  { method: "POST", template: "/api/webhooks/{}", write: true },
  // Dot segments must not reach the Data Access API from the webhook mount, or another table from this one.
  { method: "POST", template: `/api/webhooks/{}/v1/tables/${FREE_TABLE}/rows`, write: true, smuggle: true },
  { method: "POST", template: `/api/v1/tables/tbl_targets/{}/${FREE_TABLE}/rows`, write: true, smuggle: true },
];

// ---------- body routes ----------

interface BodyRoute {
  method: string;
  path: string;
  token?: string;
  contentType?: string;
  idempotencyKey?: boolean;
}

const BODY_ROUTES: BodyRoute[] = [
  { method: "POST", path: `/api/v1/tables/${FREE_TABLE}/rows`, token: TOKENS.sync },
  { method: "POST", path: `/api/v1/tables/${FREE_TABLE}/rows`, token: TOKENS.sync, idempotencyKey: true },
  { method: "PATCH", path: `/api/v1/tables/${FREE_TABLE}/rows/row_free_1`, token: TOKENS.sync },
  { method: "POST", path: "/api/v1/tables/tbl_targets/rows", token: TOKENS.sessionAda },
  { method: "POST", path: `/api/webhooks/${HOOK}` },
  { method: "POST", path: `/api/webhooks/${HOOK}`, contentType: "application/x-www-form-urlencoded" },
];

/** A form body from the same hostile pieces: fields, a JSON `payload`, raw broken encoding. */
const formBody = fc.oneof(
  fc
    .array(fc.tuple(hostileText, hostileText), { minLength: 1, maxLength: 4 })
    .map((pairs) => pairs.map(([k, v]) => `${percentEncode(k)}=${percentEncode(v)}`).join("&")),
  body.filter((b): b is string => typeof b === "string").map((b) => `payload=${percentEncode(b)}`),
  fc.constantFrom("", "=", "&&", "a=%00", "%00=1", "a=%ZZ", "payload=%7B%22a%22%3A1e400%7D"),
);

const idempotencyKey = fc.oneof(
  fc.string({ unit: "grapheme-ascii", maxLength: 40 }),
  fc.constantFrom("x".repeat(300), "", " ", "k\u00e9y"),
);

// ---------- the properties ----------

const cases = await storeCases();

for (const store of cases) {
  describe.skipIf(store.skip !== undefined)(`fuzz: hostile input on ${store.name}`, () => {
    let opened: Opened;
    let h: HostileApi;
    beforeAll(async () => {
      opened = await store.open();
      h = await hostileApi(opened);
    });
    const statuses = new Map<string, number>();
    afterAll(async () => {
      if (STATS) console.log(`${store.name}:`, Object.fromEntries([...statuses].sort()));
      await opened?.close();
    });

    /** One request; a write refused must leave the counts as they were and everything readable. */
    async function probe(
      method: string,
      path: string,
      init: Parameters<HostileApi["send"]>[2],
      write: boolean,
    ): Promise<Answer> {
      const before = write ? await counts(h) : null;
      const answer = await h.send(method, path, init);
      if (STATS) {
        const name = `${method} ${path.split("?")[0]!.replace(/^(\/api\/(?:v1\/)?[a-z]+)\/.*$/, "$1/…")} ${answer.status} ${answer.json?.error?.code ?? ""}`;
        statuses.set(name, (statuses.get(name) ?? 0) + 1);
      }
      const what = `${method} ${JSON.stringify(path).slice(0, 300)}`;
      expectHandled(answer, what);
      if (before !== null && answer.status >= 400)
        expect(await counts(h), `${what} was refused (${answer.status}) but changed the store`).toEqual(before);
      expect(h.logged, what).toEqual([]);
      return answer;
    }

    it(
      "hostile path ids",
      async () => {
        await fc.assert(
          fc.asyncProperty(
            fc.constantFrom(...ID_ROUTES),
            segment,
            fc.constantFrom(TOKENS.sync, TOKENS.sessionAda),
            async (route, id, token) => {
              const path = route.template.replace("{}", id);
              const answer = await probe(
                route.method,
                path,
                { token, body: route.write && route.method !== "DELETE" ? '{"note":"fuzz"}' : undefined },
                route.write,
              );
              // A dot segment (encoded or not) is never resolved: the webhook mount's suffix routes do not exist.
              if (route.smuggle) expect(answer.status, path).toBeGreaterThanOrEqual(400);
            },
          ),
          options,
        );
        expect(Object.keys(Object.prototype)).toEqual([]);
      },
      TIMEOUT_MS,
    );

    it(
      "hostile query values",
      async () => {
        await fc.assert(
          fc.asyncProperty(
            fc.constantFrom(...READ_ROUTES),
            query,
            fc.constantFrom(TOKENS.sync, TOKENS.sessionAda),
            async (route, search, token) => {
              const path =
                token === TOKENS.sessionAda && !search.includes("teamId")
                  ? `${route}?teamId=team_ops&${search}`
                  : `${route}?${search}`;
              await probe("GET", path, { token }, false);
            },
          ),
          options,
        );
        expect(Object.keys(Object.prototype)).toEqual([]);
      },
      TIMEOUT_MS,
    );

    it(
      "hostile bodies on every write route",
      async () => {
        await fc.assert(
          fc.asyncProperty(
            fc.constantFrom(...BODY_ROUTES),
            body,
            formBody,
            idempotencyKey,
            async (route, json, form, key) => {
              const headers: Record<string, string> = {};
              if (route.contentType) headers["content-type"] = route.contentType;
              if (route.idempotencyKey) headers["idempotency-key"] = key;
              const sent = route.contentType ? form : json;
              const answer = await probe(route.method, route.path, { token: route.token, body: sent, headers }, true);
              // What the boundary refuses (see regressions.test.ts) is never accepted.
              if (answer.status < 300 && typeof sent === "string")
                expect(refusedByRule(sent), `${route.path} accepted ${sent.slice(0, 200)}`).toBe(false);
            },
          ),
          options,
        );
        expect(Object.keys(Object.prototype)).toEqual([]);
        expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      },
      TIMEOUT_MS,
    );
  });
}

/**
 * Whether a JSON text breaks a rule of the boundary, judged independently of
 * its implementation: a NUL or unpaired surrogate escape in a string, a
 * number that parses to Infinity, or nesting past 64 (counted on the parsed
 * value, so only for text JSON.parse can take).
 */
function refusedByRule(sent: string): boolean {
  let value: unknown;
  try {
    value = JSON.parse(sent);
  } catch {
    return false; // form bodies and text that is not JSON: judged by their status alone
  }
  const bad = (v: unknown, depth: number): boolean => {
    if (typeof v === "number") return !Number.isFinite(v);
    if (typeof v === "string") return /\u0000/.test(v) || !isWellFormed(v);
    if (v === null || typeof v !== "object") return false;
    if (depth > 64) return true;
    if (Array.isArray(v)) return v.some((item) => bad(item, depth + 1));
    return Object.entries(v).some(([k, item]) => bad(k, depth) || bad(item, depth + 1));
  };
  try {
    return bad(value, 1);
  } catch {
    return true; // deeper than the stack: certainly past the limit
  }
}

function isWellFormed(text: string): boolean {
  return (text as string & { isWellFormed(): boolean }).isWellFormed();
}
