import { type Context, Hono } from "hono";
import type { DataApi } from "../../src/server/api.js";

/**
 * A host application on Hono with Dataport mounted as a plain fetch handler:
 * `/api/*` goes to `api.fetch`, untouched (it answers its own CORS
 * preflights, so no Hono CORS middleware is needed in front of it).
 */
export function createHonoApp(api: Pick<DataApi, "fetch">, clientAddress: (c: Context) => string | null = () => null) {
  const app = new Hono();
  app.get("/", (c) => c.text("The host application; Dataport is under /api"));
  app.all("/api/*", (c) => api.fetch(c.req.raw, { clientAddress: clientAddress(c) }));
  return app;
}
