import { planRequired } from "../auth.js";
import type { Ports } from "../context.js";
import { randomId, sha256Hex } from "../domain/crypto.js";
import type { Allowlist, ApiKeyRecord, AuditEvent, Scope } from "../domain/model.js";
import { SCOPES } from "../domain/model.js";
import { generateApiKeyToken } from "../domain/tokens.js";
import { ApiError, notFound } from "../errors.js";
import { parseFixture } from "../fixture/load.js";

/** An API key as the host sees it: never the hash, never the token. */
export type ApiKeyInfo = Omit<ApiKeyRecord, "tokenHash">;

/** Seeding, API keys and host-written audit events. */
export interface KeyAdmin {
  /** Load a fixture (JSON value) into an empty store; `kept` when the store already holds a space. */
  seed(fixture: unknown, options?: { env?: Record<string, string | undefined> }): Promise<"loaded" | "kept">;
  /**
   * Create an API key. The plaintext token is returned once and only its
   * SHA-256 is stored. Free-plan teams are refused (403 plan_required).
   */
  createApiKey(input: {
    teamId: string;
    name: string;
    createdBy: string;
    scopes: Scope[];
    allowlist?: Partial<Allowlist>;
  }): Promise<{ key: ApiKeyInfo; token: string }>;
  /** Revoke a key; later calls with it answer 401. */
  revokeApiKey(id: string, by?: { userId: string }): Promise<ApiKeyInfo>;
  /** Record a host-written audit event (stored now, at the next feed position). */
  recordAuditEvent(event: Omit<AuditEvent, "id" | "time"> & { id?: string; time?: string }): Promise<AuditEvent>;
}

export function keyAdmin(ports: Ports): KeyAdmin {
  const { storage, clock } = ports;
  const isoNow = () => new Date(clock.now()).toISOString();

  async function recordAuditEvent(input: Omit<AuditEvent, "id" | "time"> & { id?: string; time?: string }): Promise<AuditEvent> {
    const event: AuditEvent = { ...input, id: input.id ?? randomId("evt_"), time: input.time ?? isoNow() };
    await storage.appendAuditEvent(event, clock.now());
    return event;
  }

  return {
    async seed(fixture, options = {}) {
      return storage.seed(parseFixture(fixture, options));
    },

    async createApiKey(input) {
      const team = await storage.getTeam(input.teamId);
      if (!team) throw notFound("team");
      if (team.plan === "free") throw planRequired("API keys need the Pro, Team or Business plan");
      const creator = await storage.getUser(input.createdBy);
      if (!creator) throw notFound("user");
      const unknownScopes = input.scopes.filter((s) => !SCOPES.includes(s));
      if (unknownScopes.length > 0) {
        throw new ApiError(400, "invalid_parameter", `unknown scope ${unknownScopes[0]}`, { details: { parameter: "scopes" } });
      }
      if (input.name.trim() === "") throw new ApiError(400, "invalid_parameter", "a key needs a name", { details: { parameter: "name" } });
      const token = generateApiKeyToken();
      const record: ApiKeyRecord = {
        id: randomId("key_"),
        name: input.name,
        teamId: team.id,
        tokenHash: sha256Hex(token),
        createdBy: creator.id,
        scopes: [...new Set(input.scopes)],
        allowlist: {
          datasets: [...(input.allowlist?.datasets ?? [])],
          connections: [...(input.allowlist?.connections ?? [])],
          tables: [...(input.allowlist?.tables ?? [])],
        },
        createdAt: isoNow(),
        revokedAt: null,
      };
      await storage.insertApiKey(record);
      await recordAuditEvent({
        teamId: team.id,
        category: "audit",
        action: "api_key.created",
        actor: { type: "user", id: creator.id, email: creator.email },
        target: { type: "api_key", id: record.id },
        outcome: "success",
        ip: null,
        userAgent: null,
        details: { name: record.name, scopes: record.scopes },
      });
      const { tokenHash: _hash, ...key } = record;
      return { key, token };
    },

    async revokeApiKey(id, by) {
      const revoked = await storage.revokeApiKey(id, isoNow());
      if (!revoked) throw notFound("api key");
      const user = by ? await storage.getUser(by.userId) : null;
      await recordAuditEvent({
        teamId: revoked.teamId,
        category: "audit",
        action: "api_key.revoked",
        actor: user ? { type: "user", id: user.id, email: user.email } : { type: "system", id: "host", name: "host application" },
        target: { type: "api_key", id: revoked.id },
        outcome: "success",
        ip: null,
        userAgent: null,
      });
      const { tokenHash: _hash, ...key } = revoked;
      return key;
    },

    recordAuditEvent,
  };
}
