import express from "express";
import pg from "pg";
import { toNodeHandler } from "dataport/node";
import { createPostgresStorage } from "dataport/postgres";
import { createDataApi, type DataApi, type DataApiOptions, mountStorage } from "dataport";
import { hostIdentity } from "./identity.js";
import { ensureHostSchema } from "./schema.js";
import { hostSessions } from "./sessions.js";

export interface HostAppOptions {
  /** A `postgres://` URL; the host's tables and Dataport's share the database (and one pool). */
  connectionString: string;
  /** The host's own tables. Default `host_app`. */
  hostSchema?: string;
  /** Dataport's tables: everything but identity. Default `dataport`. */
  dataportSchema?: string;
  /** Further Dataport options (appUrl, …). */
  dataApi?: Omit<DataApiOptions, "storage" | "sessions">;
}

export interface HostApp {
  app: express.Express;
  api: DataApi;
  /** Closes Dataport's store and the pool. Call after the HTTP server has closed. */
  close(): Promise<void>;
}

/**
 * A host application with its own users, teams, memberships and sign-in,
 * and Dataport mounted under `/api/`:
 *
 * - identity (who exists, who belongs to which team, on which plan) is read
 *   from the host's tables on every request, so a change there counts at once;
 * - session tokens are the host's own (`POST /signin`);
 * - API keys, datasets, input tables, webhooks, audit and usage stay in
 *   Dataport's PostgreSQL store.
 */
export async function createHostApp(options: HostAppOptions): Promise<HostApp> {
  const hostSchema = options.hostSchema ?? "host_app";
  const pool = new pg.Pool({ connectionString: options.connectionString });
  pool.on("error", () => {}); // an idle connection that drops must not crash the process
  try {
    await ensureHostSchema(pool, hostSchema);
    const dataportStore = await createPostgresStorage({ pool, schema: options.dataportSchema ?? "dataport" });
    const sessions = hostSessions(pool, hostSchema);
    const api = createDataApi({
      ...options.dataApi,
      storage: mountStorage(dataportStore, { identity: hostIdentity(pool, hostSchema) }),
      sessions: sessions.authenticate,
    });

    const app = express();
    // Dataport first, before any body parser: it reads raw bodies itself and calls next() outside /api/.
    app.use(toNodeHandler(api));
    // The host's own routes, each with its own parser.
    app.post("/signin", express.json(), async (req, res) => {
      const email: unknown = req.body?.email;
      if (typeof email !== "string" || email.trim() === "") {
        res.status(400).json({ error: { code: "invalid_body", message: 'send { "email": "…" }' } });
        return;
      }
      const session = await sessions.signIn(email.trim());
      if (!session) {
        res.status(401).json({ error: { code: "unauthorized", message: "no user with this email" } });
        return;
      }
      res.json(session);
    });
    app.post("/signout", async (req, res) => {
      const token = /^Bearer (\S+)$/i.exec(req.get("authorization") ?? "")?.[1];
      res.status(token && (await sessions.signOut(token)) ? 204 : 401).end();
    });
    app.get("/", (_req, res) => {
      res.type("text/plain").send("Example host: POST /signin { email }, then call /api/v1/me with the token");
    });
    // The host's routes answer in an error envelope too: a malformed body is a 4xx, never a stack trace.
    app.use(
      (
        error: { status?: unknown; message?: unknown },
        _req: express.Request,
        res: express.Response,
        _next: express.NextFunction,
      ) => {
        const status =
          typeof error.status === "number" && error.status >= 400 && error.status < 500 ? error.status : 500;
        if (status === 500) console.error("host app:", error);
        const code = status === 500 ? "internal" : status === 413 ? "payload_too_large" : "invalid_body";
        res
          .status(status)
          .json({ error: { code, message: status === 500 ? "internal error" : String(error.message) } });
      },
    );

    return {
      app,
      api,
      async close() {
        await dataportStore.close(); // a store on a pool it was given leaves the pool to us
        await pool.end();
      },
    };
  } catch (error) {
    await pool.end().catch(() => {});
    throw error;
  }
}
