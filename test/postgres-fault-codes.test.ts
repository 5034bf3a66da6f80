import { describe, expect, it } from "vitest";
import { ApiError } from "../src/base/api-error.js";
import { storeFault } from "../src/postgres/db.js";

/**
 * How the PostgreSQL store reports the server's SQLSTATEs: a retry later may succeed (503), or the statement was wrong
 * (as it is).
 */
function reported(code: string, message = "from the server"): unknown {
  return storeFault(Object.assign(new Error(message), { code }));
}

describe("postgres: which server errors the store reports as 503 storage_unavailable", () => {
  it.each([
    ["57014", "a statement cancelled (statement_timeout at the call deadline, fired before the deadline's own timer)"],
    ["55P03", "a lock not had within lock_timeout"],
    ["40001", "a serialization failure"],
    ["57P01", "a backend terminated by an administrator"],
    ["53300", "too many connections"],
    ["08006", "a connection failure"],
  ])("%s: %s", (code) => {
    const fault = reported(code);
    expect(fault).toBeInstanceOf(ApiError);
    expect(fault).toMatchObject({ status: 503, code: "storage_unavailable" });
    expect((fault as ApiError).message).not.toContain("from the server");
    expect(((fault as ApiError).cause as { code: string }).code).toBe(code);
  });

  it.each([
    ["42P01", "an undefined table"],
    ["23505", "a unique violation"],
    ["22P02", "an invalid text representation"],
  ])("%s (%s) is left as it is", (code) => {
    const error = Object.assign(new Error("from the server"), { code });
    expect(storeFault(error)).toBe(error);
  });
});
