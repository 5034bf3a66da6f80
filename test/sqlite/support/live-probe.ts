import { expect } from "vitest";

type Call = (method: string, path: string) => Promise<{ status: number }>;

/**
 * `/api/health/live`, asked again and again (every 5 ms) until `done`
 * settles: how many answers came back meanwhile. An event loop that is
 * blocked (a statement running on it, a busy wait for a lock) answers none
 * until it is free.
 */
export async function liveWhile(call: Call, done: Promise<unknown>): Promise<number> {
  let settled = false;
  void done.then(
    () => (settled = true),
    () => (settled = true),
  );
  let answered = 0;
  while (!settled) {
    const live = await call("GET", "/api/health/live");
    expect(live.status).toBe(200);
    if (!settled) answered++;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return answered;
}
