import { createDataApi, type DataApiOptions } from "../../src/server/api.js";
import { parseFixture } from "../../src/fixture/load.js";
import { createFixedClock } from "../../src/memory/fixed-clock.js";
import { createMemoryStorage } from "../../src/memory/memory-storage.js";
import { testFixture } from "./fixture.js";
import { assertMatchesDocument } from "./openapi.js";

export const NOW = "2026-11-01T12:00:00.000Z";

/** An API on the memory ports with the test fixture loaded and the clock fixed at NOW. */
export async function setup(options: DataApiOptions & { fixture?: unknown } = {}) {
  const storage = options.storage ?? createMemoryStorage();
  const clock = createFixedClock(NOW);
  await storage.seed(parseFixture(options.fixture ?? testFixture()));
  const api = createDataApi({ clock, ...options, storage });
  async function call(
    method: string,
    path: string,
    init: { token?: string; body?: unknown; headers?: Record<string, string> } = {},
  ) {
    const headers: Record<string, string> = { ...init.headers };
    if (init.token) headers.authorization = `Bearer ${init.token}`;
    let body: string | undefined;
    if (init.body !== undefined) {
      body = typeof init.body === "string" ? init.body : JSON.stringify(init.body);
      headers["content-type"] ??= "application/json";
    }
    const response = await api.fetch(new Request(`http://dataport.test${path}`, { method, headers, body }), {
      clientAddress: "198.51.100.7",
    });
    const text = await response.text();
    let json: any = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null;
    }
    // Every response a handler test sees must be one the OpenAPI document describes.
    assertMatchesDocument(api, {
      method,
      path,
      status: response.status,
      contentType: response.headers.get("content-type"),
      json,
    });
    return { status: response.status, headers: response.headers, json, text };
  }
  return { api, storage, clock, call };
}
