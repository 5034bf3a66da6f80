import { describe, expect, it, vi } from "vitest";
import { createAdmin } from "../src/admin/index.js";
import * as crypto from "../src/domain/crypto.js";
import { createFixedClock } from "../src/memory/fixed-clock.js";
import { createTokenHashes, TOKEN_HASH_TTL_MS } from "../src/core/token-hashes.js";
import { setup } from "./support/api.js";
import { TOKENS } from "./support/fixture.js";

const HASH_OF_ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

describe("createTokenHashes", () => {
  it("hashes with SHA-256 and remembers a token only once told it authenticated", () => {
    const clock = createFixedClock("2026-11-01T00:00:00Z");
    const hashes = createTokenHashes(4, clock);
    const spy = vi.spyOn(crypto, "sha256Hex");
    try {
      expect(hashes.of("abc")).toBe(HASH_OF_ABC);
      expect(hashes.of("abc")).toBe(HASH_OF_ABC);
      expect(spy).toHaveBeenCalledTimes(2);
      hashes.remember("abc", HASH_OF_ABC);
      expect(hashes.of("abc")).toBe(HASH_OF_ABC);
      expect(spy).toHaveBeenCalledTimes(2);
    } finally {
      spy.mockRestore();
    }
  });

  it("forgets a token TOKEN_HASH_TTL_MS after remembering it, and the least recently used when full", () => {
    const clock = createFixedClock("2026-11-01T00:00:00Z");
    const hashes = createTokenHashes(2, clock);
    // A remembered value is returned as remembered: a wrong one shows the memo was used.
    hashes.remember("abc", "remembered");
    clock.advance(TOKEN_HASH_TTL_MS - 1);
    expect(hashes.of("abc")).toBe("remembered");
    clock.advance(1);
    expect(hashes.of("abc")).toBe(HASH_OF_ABC);

    hashes.remember("a", "A");
    hashes.remember("b", "B");
    expect(hashes.of("a")).toBe("A"); // a is now used more recently than b
    hashes.remember("c", "C");
    expect(hashes.of("b")).toBe(crypto.sha256Hex("b"));
    expect(hashes.of("a")).toBe("A");
    expect(hashes.of("c")).toBe("C");
  });

  it("keeps a remembered hash for TOKEN_HASH_TTL_MS from when it was remembered, however often it is used", () => {
    const clock = createFixedClock("2026-11-01T00:00:00Z");
    const hashes = createTokenHashes(2, clock);
    hashes.remember("abc", "remembered");
    clock.advance(TOKEN_HASH_TTL_MS / 2);
    expect(hashes.of("abc")).toBe("remembered");
    hashes.remember("abc", "remembered"); // authenticated again: not a new five minutes
    clock.advance(TOKEN_HASH_TTL_MS / 2);
    expect(hashes.of("abc")).toBe(HASH_OF_ABC);
  });

  it("remembers nothing with size 0 (or below 1), and refuses a size that is not finite", () => {
    for (const size of [0, 0.5, -1]) {
      const hashes = createTokenHashes(size, createFixedClock(0));
      hashes.remember("abc", "remembered");
      expect(hashes.of("abc")).toBe(HASH_OF_ABC);
    }
    expect(() => createTokenHashes(Number.POSITIVE_INFINITY, createFixedClock(0))).toThrow(/tokenHashCacheSize/);
  });
});

describe("authentication with remembered token hashes", () => {
  it("still refuses a key on the very next request after it is revoked", async () => {
    const { api, call } = await setup();
    const admin = createAdmin(api);
    const { key, token } = await admin.createApiKey({
      teamId: "team_ops",
      name: "Busy",
      createdBy: "usr_ada",
      scopes: ["data:read"],
    });
    for (let i = 0; i < 3; i++) expect((await call("GET", "/api/v1/me", { token })).status).toBe(200);
    await admin.revokeApiKey(key.id);
    const res = await call("GET", "/api/v1/me", { token });
    expect(res.status).toBe(401);
    expect(res.json.error.code).toBe("unauthorized");
  });

  it("serves session tokens and API keys alike when nothing is remembered (tokenHashCacheSize 0)", async () => {
    const { call } = await setup({ tokenHashCacheSize: 0 });
    expect((await call("GET", "/api/v1/me", { token: TOKENS.sync })).json.kind).toBe("api-key");
    expect((await call("GET", "/api/v1/me", { token: TOKENS.sessionAda })).json.kind).toBe("session-token");
    expect((await call("GET", "/api/v1/me", { token: "dp_live_unknown" })).status).toBe(401);
  });
});
