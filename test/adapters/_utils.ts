import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** A server under test: where it listens and how to stop it. */
export interface Target {
  name: string;
  url: string;
  stop(): Promise<void>;
}

/** The runtime binary installed from npm (node_modules/.bin), and whether it runs on this machine. */
export function runtimeBinary(
  name: "bun" | "deno",
): { bin: string; runnable: true } | { bin: string; runnable: false; reason: string } {
  const bin = `${ROOT}node_modules/.bin/${name}`;
  if (!existsSync(bin)) return { bin, runnable: false, reason: `${bin} is not installed (npm install)` };
  const probe = spawnSync(bin, ["--version"], { timeout: 60_000, encoding: "utf8" });
  if (probe.error) return { bin, runnable: false, reason: probe.error.message };
  if (probe.status !== 0)
    return { bin, runnable: false, reason: `--version exited ${probe.status}: ${probe.stderr.trim()}` };
  return { bin, runnable: true };
}

/**
 * Start a server process and wait for its "listening on http://HOST:PORT"
 * line. Its output is kept for the error message when it fails to start.
 */
export function startProcess(name: string, bin: string, args: string[], timeoutMs = 90_000): Promise<Target> {
  const child = spawn(bin, args, {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, NO_COLOR: "1" },
  });
  let output = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      void stopChild(child);
      reject(new Error(`${name} did not start within ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8");
      const match = /listening on (http:\/\/[^\s]+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        child.off("exit", onExit);
        resolve({ name, url: match[1]!, stop: () => stopChild(child) });
      }
    };
    const onExit = (code: number | null) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited with ${code} before listening:\n${output}`));
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", (chunk: Buffer) => void (output += chunk.toString("utf8")));
    child.once("exit", onExit);
  });
}

/** SIGTERM (the examples shut down cleanly on it), SIGKILL if it lingers. */
function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => child.kill("SIGKILL"), 5000);
    child.once("exit", () => {
      clearTimeout(force);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

/**
 * A fresh SQLite file path for an example server's --db (in a new temporary folder, removed with the OS's temporary
 * files).
 */
export function sqliteFile(name: string): string {
  return join(mkdtempSync(join(tmpdir(), `dataport-adapter-${name}-`)), "store.sqlite");
}
