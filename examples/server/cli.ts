import { isIP } from "node:net";
import { parseArgs } from "node:util";

/** A bad flag: printed, exit code 2. */
export class UsageError extends Error {
  override name = "UsageError";
}

/** `--help`: the usage goes to stdout, exit code 0. */
export class HelpRequested extends Error {
  override name = "HelpRequested";
}

/**
 * The server cannot start for a reason the operator fixes outside the code:
 * a busy port, a host that is not this machine's, an unreachable database.
 * Printed without a stack trace, exit code 1.
 */
export class StartError extends Error {
  override name = "StartError";
}

export interface ServerConfig {
  fixture: string;
  port: number;
  host: string;
  /** A SQLite file path, `:memory:`, or a postgres:// URL. */
  db: string;
  redis: string | null;
  /** Epoch ms the clock starts at, or null for the real time. */
  now: number | null;
  auditLagSeconds: number;
  webhookRatePerSecond: number;
  /** The webhook delivery log's bounds per endpoint: entries, days, bytes of a refused body (webhook-inbox.md). */
  inboxSize: number;
  inboxDays: number;
  inboxBodyBytes: number;
  appUrl: string;
  viewUrl: string;
  /** Request and error lines: JSON lines on stdout, or none (errors then go to stderr as text). */
  log: "json" | "none";
  /** Serve Prometheus metrics at /api/metrics. */
  metrics: boolean;
  /** Bearer token /api/metrics requires (implies metrics), or null. */
  metricsToken: string | null;
  /** Per-credential Data Access API limit, requests per second (burst twice that); 0 turns it off. */
  apiRatePerSecond: number;
  /** On SIGTERM, how long in-flight requests may take to finish before their connections are cut. */
  drainTimeoutSeconds: number;
  /** A storage call running longer ends its request with 503; 0 turns the limit off. */
  storageTimeoutSeconds: number;
  /** While the rate limiter (Redis) cannot be asked, let limited requests through instead of answering 503. */
  rateLimitFailOpen: boolean;
  /** An upstream call running longer ends its query with 504; 0 turns the limit off. */
  upstreamTimeoutSeconds: number;
  /** Token of the admin HTTP API (`/api/admin/v1`), or null: not mounted. */
  adminToken: string | null;
}

/** The usage text, for the command that runs the server (`npm start --`, `npx dataport`). */
export function usage(command: string): string {
  const indent = " ".repeat(`usage: ${command} `.length);
  return [
    `usage: ${command} [--fixture FILE] [--port 8787] [--host 127.0.0.1]`,
    `[--db PATH | :memory: | postgres://...] [--redis redis://...]`,
    `[--now ISO_INSTANT] [--audit-lag SECONDS] [--webhook-rate PER_SECOND]`,
    `[--inbox-size N] [--inbox-days N] [--inbox-body-bytes N]`,
    `[--app-url URL] [--view-url URL]`,
    `[--log json|none] [--metrics] [--metrics-token TOKEN] [--api-rate PER_SECOND]`,
    `[--drain-timeout SECONDS] [--storage-timeout SECONDS] [--upstream-timeout SECONDS] [--rate-limit-fail-open]`,
    `[--admin-token TOKEN] [--help]`,
  ].join(`\n${indent}`);
}

/** Every flag: its argument, what it does, and its default (`defaults` are the command's own). */
function flagTable(defaults: {
  fixture: string;
  db: string;
}): Array<[flag: string, meaning: string, fallback: string]> {
  return [
    ["--fixture FILE", "the space to load at start (datasets, keys, dashboards; docs/fixtures.md)", defaults.fixture],
    ["--port N", "the port to listen on; 0 picks a free one", "8787"],
    [
      "--host ADDRESS",
      "the interface to listen on; 0.0.0.0 or :: for every interface",
      "127.0.0.1 (this machine only)",
    ],
    ["--db PATH|:memory:|postgres://...", "storage: a SQLite file, an in-memory store, or PostgreSQL", defaults.db],
    [
      "--redis redis://...",
      "share the query cache and rate limits through Redis (several instances)",
      "none (in-process)",
    ],
    ["--now ISO_INSTANT", "start the clock at this instant and let it run (reproducible demos)", "the real time"],
    ["--audit-lag SECONDS", "how far behind now the audit feed stays", "5"],
    [
      "--webhook-rate PER_SECOND",
      "webhook deliveries per connection per second (burst twice that); 0 turns it off",
      "50",
    ],
    ["--inbox-size N", "deliveries each webhook endpoint's delivery log keeps, the newest (1 to 1000000)", "1000"],
    ["--inbox-days N", "days a delivery stays in its endpoint's log (1 to 365)", "7"],
    ["--inbox-body-bytes N", "bytes of a refused delivery's body the log keeps (1 to 16777216)", "262144"],
    ["--app-url URL", "the public origin, for webhook URLs and the OpenAPI server", "http://HOST:PORT"],
    ["--view-url URL", "the origin of published dashboard links", "the app URL"],
    ["--log json|none", "request and error lines as JSON on stdout, or none (errors then on stderr)", "json"],
    ["--metrics", "serve Prometheus metrics at /api/metrics", "off"],
    ["--metrics-token TOKEN", "bearer token /api/metrics requires (16+ characters; implies --metrics)", "none"],
    ["--api-rate PER_SECOND", "requests per second per credential on /api/v1 (burst twice that); 0 turns it off", "20"],
    ["--drain-timeout SECONDS", "on SIGTERM, how long requests in flight may finish before connections are cut", "10"],
    ["--storage-timeout SECONDS", "a storage call running longer ends its request with 503; 0 turns it off", "10"],
    ["--upstream-timeout SECONDS", "an upstream query running longer ends with 504; 0 turns it off", "15"],
    [
      "--rate-limit-fail-open",
      "while the rate limiter (Redis) cannot be asked, let limited requests through unlimited instead of answering 503",
      "off (fail closed)",
    ],
    [
      "--admin-token TOKEN",
      "mount the admin HTTP API at /api/admin/v1 behind this bearer token (24+ characters)",
      "none (not mounted)",
    ],
    ["--help", "print this help and exit", ""],
  ];
}

/** `--help`: the usage line, then every flag with what it does and its default. */
export function help(command: string, defaults: { fixture: string; db: string }): string {
  const rows = flagTable(defaults);
  const width = Math.max(...rows.map(([flag]) => flag.length));
  const lines = rows.map(
    ([flag, meaning, fallback]) =>
      `  ${flag.padEnd(width)}  ${meaning}${fallback === "" ? "" : ` (default: ${fallback})`}`,
  );
  return [
    usage(command),
    "",
    "Serves the Dataport API (/api/v1), its webhook receiver and reference page (/api/v1/docs).",
    "",
    "options:",
    ...lines,
  ].join("\n");
}

/** Parse the example server's flags (see README, "The example server"). Throws UsageError. */
export function parseServerArgs(argv: readonly string[], defaults: { fixture: string; db: string }): ServerConfig {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        fixture: { type: "string" },
        port: { type: "string" },
        host: { type: "string" },
        db: { type: "string" },
        redis: { type: "string" },
        now: { type: "string" },
        "audit-lag": { type: "string" },
        "webhook-rate": { type: "string" },
        "inbox-size": { type: "string" },
        "inbox-days": { type: "string" },
        "inbox-body-bytes": { type: "string" },
        "app-url": { type: "string" },
        "view-url": { type: "string" },
        log: { type: "string" },
        metrics: { type: "boolean" },
        "metrics-token": { type: "string" },
        "api-rate": { type: "string" },
        "drain-timeout": { type: "string" },
        "storage-timeout": { type: "string" },
        "upstream-timeout": { type: "string" },
        "rate-limit-fail-open": { type: "boolean" },
        "admin-token": { type: "string" },
        help: { type: "boolean" },
      },
    }));
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (values.help) throw new HelpRequested("--help");
  const str = (name: string) => values[name] as string | undefined;

  const port = integer("--port", str("port") ?? "8787", 0, 65535);
  const host = hostName(str("host") ?? "127.0.0.1");
  const now = str("now");
  let nowMs: number | null = null;
  if (now !== undefined) {
    nowMs = Date.parse(now);
    if (!/^\d{4}-\d{2}-\d{2}T/.test(now) || Number.isNaN(nowMs))
      throw new UsageError(`--now must be an ISO 8601 instant, got ${now}`);
  }
  const db = database(str("db") ?? defaults.db);
  const redis = str("redis") ?? null;
  if (redis !== null && !/^rediss?:\/\//.test(redis))
    throw new UsageError(`--redis must be a redis:// URL, got ${redis}`);
  const appUrl = url("--app-url", str("app-url") ?? `http://${host.includes(":") ? `[${host}]` : host}:${port}`);
  const log = str("log") ?? "json";
  if (log !== "json" && log !== "none") throw new UsageError(`--log must be json or none, got ${log}`);
  const metricsToken = str("metrics-token") ?? null;
  if (metricsToken !== null && !/^[\x21-\x7e]{16,}$/.test(metricsToken)) {
    throw new UsageError("--metrics-token must be at least 16 printable characters without spaces");
  }
  const adminToken = str("admin-token") ?? null;
  if (adminToken !== null && !/^[\x21-\x7e]{24,}$/.test(adminToken)) {
    throw new UsageError("--admin-token must be at least 24 printable characters without spaces");
  }
  return {
    fixture: str("fixture") ?? defaults.fixture,
    port,
    host,
    db,
    redis,
    now: nowMs,
    auditLagSeconds: integer("--audit-lag", str("audit-lag") ?? "5", 0, 3600),
    // 0 turns the limit off (README), as it does for --api-rate.
    webhookRatePerSecond: nonNegative("--webhook-rate", str("webhook-rate") ?? "50"),
    inboxSize: integer("--inbox-size", str("inbox-size") ?? "1000", 1, 1_000_000),
    inboxDays: integer("--inbox-days", str("inbox-days") ?? "7", 1, 365),
    inboxBodyBytes: integer("--inbox-body-bytes", str("inbox-body-bytes") ?? "262144", 1, 16 * 1024 * 1024),
    appUrl,
    viewUrl: url("--view-url", str("view-url") ?? appUrl),
    log,
    metrics: values.metrics === true || metricsToken !== null,
    metricsToken,
    apiRatePerSecond: nonNegative("--api-rate", str("api-rate") ?? "20"),
    drainTimeoutSeconds: nonNegative("--drain-timeout", str("drain-timeout") ?? "10"),
    storageTimeoutSeconds: nonNegative("--storage-timeout", str("storage-timeout") ?? "10"),
    upstreamTimeoutSeconds: nonNegative("--upstream-timeout", str("upstream-timeout") ?? "15"),
    rateLimitFailOpen: values["rate-limit-fail-open"] === true,
    adminToken,
  };
}

/**
 * `--host`: an IP address or a DNS name. Checked here, because the default
 * app URL is built from it and would otherwise be the flag blamed.
 */
function hostName(text: string): string {
  if (isIP(text) !== 0) return text;
  const label = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
  if (text.length <= 253 && new RegExp(`^${label}(?:\\.${label})*\\.?$`).test(text)) return text;
  throw new UsageError(
    `--host must be an IP address or a host name (127.0.0.1, 0.0.0.0, ::1, localhost), got ${JSON.stringify(text)}`,
  );
}

/**
 * `--db`: a SQLite file path, `:memory:` or a postgres:// URL. Anything else
 * that looks like a URL is refused: a misspelt scheme (`postgress://`) would
 * otherwise become a SQLite file of that name. Only the scheme is quoted back,
 * never the URL (it may carry a password).
 */
function database(text: string): string {
  if (text === "") throw new UsageError("--db must not be empty");
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(text)?.[1];
  if (scheme === undefined) return text;
  if (/^postgres(ql)?$/i.test(scheme)) return `${scheme.toLowerCase()}${text.slice(scheme.length)}`;
  const hint = /^(sqlite3?|file)$/i.test(scheme)
    ? " (for SQLite, give the file path itself)"
    : /^p/i.test(scheme)
      ? " (did you mean postgres://?)"
      : "";
  throw new UsageError(
    `--db does not know the scheme ${scheme}://${hint}; give a SQLite file path, :memory:, or a postgres:// URL`,
  );
}

function integer(flag: string, text: string, min: number, max: number): number {
  if (!/^\d+$/.test(text)) throw new UsageError(`${flag} must be an integer, got ${text}`);
  const value = Number(text);
  if (value < min || value > max) throw new UsageError(`${flag} must be between ${min} and ${max}, got ${text}`);
  return value;
}

function nonNegative(flag: string, text: string): number {
  const value = Number(text);
  if (text.trim() === "" || !Number.isFinite(value) || value < 0)
    throw new UsageError(`${flag} must be a number of at least 0, got ${text}`);
  return value;
}

function url(flag: string, text: string): string {
  try {
    const parsed = new URL(text);
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") throw new Error("not http(s)");
    return text.replace(/\/+$/, "");
  } catch {
    throw new UsageError(`${flag} must be an http(s) URL, got ${text}`);
  }
}
