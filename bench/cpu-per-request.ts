/**
 * CPU time per request of one bench server: starts bench/servers/NAME.ts,
 * drives it with autocannon and reads the server process's user+system CPU
 * from /proc before and after. Steadier than req/s on a busy machine.
 *
 *   node --import tsx bench/cpu-per-request.ts me-dataport /api/v1/me GET 'Bearer dp_demo_full_access_0000000000001'
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import autocannon from "autocannon";

const [server = "me-dataport", path = "/api/v1/me", method = "GET", auth] = process.argv.slice(2);
const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const port = 19_000 + Math.floor(Math.random() * 500);
const PAYLOAD_1KB = JSON.stringify({
  event: "order.created",
  order: { id: "NW-9999", region: "EMEA", items: [{ sku: "LATTE", qty: 2 }], customer: { name: "Ada", tier: "gold" } },
  note: "x".repeat(820),
});
const child = spawn("taskset", ["-c", "1", process.execPath, "--import", "tsx", `bench/servers/${server}.ts`], { env: { ...process.env, PORT: String(port) }, stdio: ["ignore", "pipe", "inherit"] });
await new Promise<void>((resolve) => child.stdout!.on("data", (d: Buffer) => d.toString().includes("ready") && resolve()));
const ticks = () => {
  const fields = readFileSync(`/proc/${child.pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return Number(fields[11]) + Number(fields[12]); // utime + stime, in 1/100 s
};
const headers: Record<string, string> = method === "POST" ? { "content-type": "application/json" } : {};
if (auth) headers.authorization = auth;
const request = { method: method as "GET", headers, body: method === "POST" ? PAYLOAD_1KB : undefined };
const url = `http://127.0.0.1:${port}${path}`;
await autocannon({ url, connections: 50, duration: 2, requests: [request] });
const before = ticks();
const result = await autocannon({ url, connections: 50, duration: seconds, requests: [request] });
const cpu = (ticks() - before) * 10_000; // µs
console.log(`${server} ${path}: ${result.requests.average.toFixed(0)} req/s, ${(cpu / result.requests.total).toFixed(1)} µs CPU per request, non-2xx ${result.non2xx}`);
child.kill("SIGTERM");
