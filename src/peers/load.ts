import { createRequire } from "node:module";

/**
 * The optional peer dependencies (`pg`, `ioredis`, `prom-client`) are
 * CommonJS packages a host installs only for the subpath that needs them.
 * Each is loaded here, synchronously, when that subpath's module is first
 * evaluated — so `import "dataport"` never loads them, `require()` of the
 * subpath keeps working (no top-level await), and a missing one is reported
 * as what to install instead of a bare "Cannot find module".
 */
const require = createRequire(import.meta.url);

/** `require(name)`, or an error naming the package to install when it is not installed. */
export function loadPeer<T>(name: string, subpath: string): T {
  try {
    return require(name) as T;
  } catch (error) {
    if (isMissing(error, name)) {
      throw new Error(`${subpath}: install the "${name}" package (npm install ${name})`, { cause: error });
    }
    throw error;
  }
}

/** The package itself is missing (not one of its own dependencies, which is a broken install to report as is). */
function isMissing(error: unknown, name: string): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (code !== "MODULE_NOT_FOUND" && code !== "ERR_MODULE_NOT_FOUND") return false;
  return typeof message === "string" && (message.includes(`'${name}'`) || message.includes(`"${name}"`));
}
