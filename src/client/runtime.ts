/** This client's version, sent in its `User-Agent` (test/client/client.test.ts keeps it equal to package.json's). */
export const CLIENT_VERSION = "0.1.0";

/**
 * `node/20.19.0`, `bun/1.4.5` or `deno/2.9.5` on a server runtime; null in a
 * browser, which sets its own `User-Agent` and whose preflight would refuse
 * a header the API's CORS answer does not list.
 */
export function serverRuntime(): string | null {
  const g = globalThis as {
    Deno?: { version?: { deno?: string } };
    process?: { versions?: { node?: string; bun?: string } };
    document?: unknown;
  };
  if (typeof g.Deno?.version?.deno === "string") return `deno/${g.Deno.version.deno}`;
  if (g.document !== undefined) return null;
  const versions = g.process?.versions;
  if (typeof versions?.bun === "string") return `bun/${versions.bun}`;
  if (typeof versions?.node === "string") return `node/${versions.node}`;
  return null;
}

/** The default `User-Agent` on a server runtime: `dataport-client/0.1.0 node/20.19.0`. */
export function defaultUserAgent(): string | null {
  const runtime = serverRuntime();
  return runtime === null ? null : `dataport-client/${CLIENT_VERSION} ${runtime}`;
}
