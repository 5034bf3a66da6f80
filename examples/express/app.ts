import express from "express";
import { toNodeHandler } from "../../adapters/node.js";
import type { DataApi } from "../../src/server/api.js";

/**
 * A host application on Express with Dataport mounted as middleware:
 * `toNodeHandler(api)` answers paths under `/api/` and calls `next()` for the
 * rest. Mount it before any body parser — Dataport reads raw bodies itself
 * (webhook signatures are computed over the exact bytes).
 */
export function createExpressApp(api: Pick<DataApi, "handle">) {
  const app = express();
  app.use(toNodeHandler(api));
  app.get("/", (_req, res) => {
    res.type("text/plain").send("The host application; Dataport is under /api");
  });
  return app;
}
