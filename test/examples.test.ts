import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { createExpressApp } from "../examples/express/app.js";
import { createHonoApp } from "../examples/hono/app.js";
import { setup } from "./support/api.js";
import { TOKENS } from "./support/fixture.js";

const auth = { authorization: `Bearer ${TOKENS.sync}` };

describe("mounting in Hono as a plain fetch handler", () => {
  it("routes /api/* to Dataport with the client address and leaves the rest to the host", async () => {
    const { api } = await setup();
    const seen: Array<string | null | undefined> = [];
    const spy = {
      fetch: (request: Request, context?: { clientAddress?: string | null }) => (
        seen.push(context?.clientAddress),
        api.fetch(request, context)
      ),
    };
    const app = createHonoApp(spy, () => "203.0.113.9");
    const me = await app.fetch(new Request("http://host.test/api/v1/me", { headers: auth }));
    expect(me.status).toBe(200);
    expect(await me.json()).toMatchObject({ kind: "api-key", name: "Warehouse sync" });
    expect(seen).toEqual(["203.0.113.9"]);
    const preflight = await app.fetch(new Request("http://host.test/api/v1/datasets", { method: "OPTIONS" }));
    expect(preflight.status).toBe(204);
    const home = await app.fetch(new Request("http://host.test/"));
    expect(await home.text()).toBe("The host application; Dataport is under /api");
    const unknown = await app.fetch(new Request("http://host.test/api/v1/nope", { headers: auth }));
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe("not_found");
  });
});

describe("mounting in Express through toNodeHandler(api)", () => {
  it("answers /api/ paths and passes other paths to the host's routes", async () => {
    const { api } = await setup();
    const server = createExpressApp(api).listen(0, "127.0.0.1");
    await new Promise<void>((resolve) => server.once("listening", () => resolve()));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const rows = await fetch(`${base}/api/v1/datasets/ds_orders/rows?maxRows=1&columns=order_id`, { headers: auth });
      expect(rows.status).toBe(200);
      expect(((await rows.json()) as { data: unknown[] }).data).toEqual([{ order_id: "A-1" }]);
      const home = await fetch(`${base}/`);
      expect(await home.text()).toBe("The host application; Dataport is under /api");
      const elsewhere = await fetch(`${base}/not-dataport`);
      expect(elsewhere.status).toBe(404);
      expect(elsewhere.headers.get("x-request-id")).toBeNull(); // Express's 404, not Dataport's
      const preflight = await fetch(`${base}/api/v1/me`, { method: "OPTIONS" });
      expect(preflight.status).toBe(204);
      expect(preflight.headers.get("access-control-allow-origin")).toBe("*");
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
