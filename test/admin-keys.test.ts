import { describe, expect, it } from "vitest";
import { createAdmin } from "../src/admin/index.js";
import { ApiError } from "../src/base/api-error.js";
import { sha256Hex } from "../src/domain/crypto.js";
import { generateApiKeyToken, isWellFormedApiKeyToken } from "../src/domain/tokens.js";
import type { MemoryStorage } from "../src/memory/memory-storage.js";
import { NOW, setup } from "./support/api.js";

describe("admin: API keys", () => {
  it("creates a key whose token works once shown, stores only its hash, and records an audit event", async () => {
    const { api, storage, call } = await setup();
    const admin = createAdmin(api);
    const { key, token } = await admin.createApiKey({
      teamId: "team_ops",
      name: "CI export",
      createdBy: "usr_ada",
      scopes: ["data:read"],
      allowlist: { datasets: ["ds_orders"] },
    });
    expect(token).toMatch(/^dp_live_[0-9A-Za-z]{36}$/);
    expect(isWellFormedApiKeyToken(token)).toBe(true);
    expect(key).toEqual({
      id: key.id,
      name: "CI export",
      teamId: "team_ops",
      createdBy: "usr_ada",
      scopes: ["data:read"],
      allowlist: { datasets: ["ds_orders"], connections: [], tables: [] },
      createdAt: NOW,
      revokedAt: null,
    });
    expect(key).not.toHaveProperty("tokenHash");
    const stored = await storage.credentials.getApiKey(key.id);
    expect(stored?.tokenHash).toBe(sha256Hex(token));
    expect(JSON.stringify(stored)).not.toContain(token);

    const me = await call("GET", "/api/v1/me", { token });
    expect(me.status).toBe(200);
    expect(me.json.name).toBe("CI export");
    const rows = await call("GET", "/api/v1/datasets/ds_stores", { token });
    expect(rows.status).toBe(404);

    const events = (storage as MemoryStorage).state.auditLog
      .map((e) => e.event)
      .filter((e) => e.action === "api_key.created");
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      teamId: "team_ops",
      category: "audit",
      target: { type: "api_key", id: key.id },
      actor: { type: "user", id: "usr_ada" },
    });
  });

  it("refuses a key for a Free-plan team with 403 plan_required", async () => {
    const { api } = await setup();
    const admin = createAdmin(api);
    const refusal = admin.createApiKey({ teamId: "team_free", name: "x", createdBy: "usr_ada", scopes: ["data:read"] });
    await expect(refusal).rejects.toBeInstanceOf(ApiError);
    await expect(refusal).rejects.toMatchObject({ status: 403, code: "plan_required" });
  });

  it("refuses unknown teams, users and scopes", async () => {
    const { api } = await setup();
    const admin = createAdmin(api);
    await expect(
      admin.createApiKey({ teamId: "team_nope", name: "x", createdBy: "usr_ada", scopes: [] }),
    ).rejects.toMatchObject({ status: 404 });
    // admin-api.md: a reference in the body to an unknown id, or a bad value, is 422 naming it.
    await expect(
      admin.createApiKey({ teamId: "team_ops", name: "x", createdBy: "usr_nope", scopes: [] }),
    ).rejects.toMatchObject({
      status: 422,
      code: "validation_failed",
      details: { path: "$.createdBy" },
    });
    await expect(
      admin.createApiKey({ teamId: "team_ops", name: "x", createdBy: "usr_ada", scopes: ["data:write" as never] }),
    ).rejects.toMatchObject({ status: 422, code: "validation_failed", details: { path: "$.scopes[0]" } });
  });

  it("revokes a key: later calls with it answer 401", async () => {
    const { api, call, storage } = await setup();
    const admin = createAdmin(api);
    const { key, token } = await admin.createApiKey({
      teamId: "team_ops",
      name: "Temp",
      createdBy: "usr_ada",
      scopes: ["data:read"],
    });
    expect((await call("GET", "/api/v1/me", { token })).status).toBe(200);
    const revoked = await admin.revokeApiKey(key.id, { userId: "usr_ada" });
    expect(revoked.revokedAt).toBe(NOW);
    const after = await call("GET", "/api/v1/me", { token });
    expect(after.status).toBe(401);
    expect(after.json.error.code).toBe("unauthorized");
    expect((storage as MemoryStorage).state.auditLog.map((e) => e.event.action)).toContain("api_key.revoked");
    await expect(admin.revokeApiKey("key_missing")).rejects.toMatchObject({ status: 404 });
  });

  it("generates distinct tokens whose checksum catches a typo", () => {
    const tokens = new Set<string>();
    for (let i = 0; i < 200; i++) tokens.add(generateApiKeyToken());
    expect(tokens.size).toBe(200);
    const token = [...tokens][0]!;
    const typo = token.slice(0, 10) + (token[10] === "a" ? "b" : "a") + token.slice(11);
    expect(isWellFormedApiKeyToken(typo)).toBe(false);
  });
});
