import { describe, expect, it } from "vitest";
import { createDataApi } from "../src/server/api.js";
import { createCaches } from "../src/core/caches.js";
import type { ApiKeyRecord, Team } from "../src/domain/model.js";
import { createFixedClock } from "../src/memory/fixed-clock.js";

const clock = createFixedClock("2026-11-01T00:00:00Z");

function frozenKey(id: string, name = "Sync"): ApiKeyRecord {
  return Object.freeze({
    id,
    name,
    teamId: "team_ops",
    tokenHash: `hash_${id}`,
    createdBy: null,
    scopes: Object.freeze(["data:read"]),
    allowlist: Object.freeze({
      datasets: Object.freeze([]),
      connections: Object.freeze([]),
      tables: Object.freeze([]),
    }),
    createdAt: "2026-10-01T00:00:00Z",
    revokedAt: null,
  }) as unknown as ApiKeyRecord;
}
const team = Object.freeze({
  id: "team_ops",
  name: "Ops",
  plan: "pro",
  businessId: null,
  isPersonal: false,
}) as unknown as Team;

describe("createCaches", () => {
  it("keeps a /me body for the very records it was made from, in this instance only", () => {
    const one = createCaches({ tokenHashCacheSize: 16 }, clock);
    const other = createCaches({ tokenHashCacheSize: 16 }, clock);
    const key = frozenKey("key_a");
    one.keyBodies.remember(key, team, '{"name":"Sync"}');
    expect(one.keyBodies.get(key, team)).toBe('{"name":"Sync"}');
    expect(other.keyBodies.get(key, team)).toBeUndefined();
    // Same id, another record (a rename): not the remembered body.
    expect(one.keyBodies.get(frozenKey("key_a", "Renamed"), team)).toBeUndefined();
    expect(one.keyBodies.get(key, Object.freeze({ ...team, name: "Ops 2" }))).toBeUndefined();
  });

  it("remembers nothing for records that may still change", () => {
    const { keyBodies } = createCaches({ tokenHashCacheSize: 16 }, clock);
    const mutable = { ...frozenKey("key_m"), scopes: ["data:read"] } as unknown as ApiKeyRecord;
    keyBodies.remember(mutable, team, "{}");
    expect(keyBodies.get(mutable, team)).toBeUndefined();
  });

  it("keeps at most 1024 bodies, forgetting the least recently used", () => {
    const { keyBodies } = createCaches({ tokenHashCacheSize: 16 }, clock);
    const keys = Array.from({ length: 1025 }, (_, i) => frozenKey(`key_${i}`));
    for (const key of keys) keyBodies.remember(key, team, key.id);
    expect(keyBodies.get(keys[0]!, team)).toBeUndefined();
    expect(keyBodies.get(keys[1]!, team)).toBe("key_1");
    expect(keyBodies.get(keys[1024]!, team)).toBe("key_1024");
  });

  it("serialises each OpenAPI document once per instance", () => {
    const { documents } = createCaches({ tokenHashCacheSize: 0 }, clock);
    documents.set("api", "{}");
    documents.set("admin", "{ }");
    expect([documents.get("api"), documents.get("admin"), documents.size]).toEqual(["{}", "{ }", 2]);
  });

  it("gives two API instances in one process their own OpenAPI document", async () => {
    const served = async (appUrl: string) => {
      const api = createDataApi({ appUrl });
      const res = await api.fetch(new Request("http://x/api/v1/openapi.json"));
      return ((await res.json()) as { servers: Array<{ url: string }> }).servers[0]!.url;
    };
    expect(await served("https://one.example.com")).toBe("https://one.example.com");
    expect(await served("https://two.example.com")).toBe("https://two.example.com");
  });
});
