import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";

const root = join(import.meta.dirname, "..", "..");

/**
 * The listening URL a server process prints, its output so far, and when its
 * output pipe closes. `exitRejects`: a process that exits first rejects `url`
 * (leave it off where a test expects the exit and never awaits `url`).
 */
export function watchOutput(
  child: ChildProcess,
  options: { timeoutMs?: number; exitRejects?: boolean } = {},
): { url: Promise<string>; output: () => string; closed: Promise<void> } {
  let text = "";
  const closed = new Promise<void>((resolve) => child.stdout!.on("close", () => resolve()));
  child.stderr!.on("data", (chunk: Buffer) => (text += chunk.toString()));
  const url = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line:\n${text}`)), options.timeoutMs ?? 30_000);
    child.stdout!.on("data", (chunk: Buffer) => {
      text += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(text);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    if (options.exitRejects)
      child.once("exit", () => setTimeout(() => reject(new Error(`exited before listening:\n${text}`)), 100));
  });
  return { url, output: () => text, closed };
}

/**
 * The example server (or another script of the repository) as a process of
 * the runtime running this test (Node under tsx; Bun runs TypeScript
 * itself); resolves once it listens.
 */
export async function startServerProcess(args: readonly string[]): Promise<{ child: ChildProcess; url: string }> {
  const runner = "Bun" in globalThis ? [] : ["--import", "tsx"];
  const child = spawn(process.execPath, [...runner, ...args], { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), 30_000);
    const onData = (d: Buffer) => {
      output += d.toString();
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${output}`));
    });
  });
  return { child, url };
}

/** Signal a process and wait for it to exit (at once when it has already). */
export async function stopProcess(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill(signal);
  await exited;
}
