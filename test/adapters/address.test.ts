import { describe, expect, it } from "vitest";
import { DEFAULT_HOSTNAME, normalizeClientAddress } from "../../adapters/address.js";

describe("normalizeClientAddress (every adapter's client address)", () => {
  it("reports an IPv4-mapped IPv6 address as the IPv4 address, in any case", () => {
    expect(normalizeClientAddress("::ffff:127.0.0.1")).toBe("127.0.0.1");
    expect(normalizeClientAddress("::FFFF:203.0.113.9")).toBe("203.0.113.9");
  });

  it("keeps IPv4, IPv6 and anything else as the runtime gave it; no address is null", () => {
    expect(normalizeClientAddress("198.51.100.7")).toBe("198.51.100.7");
    expect(normalizeClientAddress("::1")).toBe("::1");
    expect(normalizeClientAddress("2001:db8::ffff:1.2.3.4")).toBe("2001:db8::ffff:1.2.3.4");
    expect(normalizeClientAddress("::ffff:7f00:1")).toBe("::ffff:7f00:1");
    expect(normalizeClientAddress(undefined)).toBeNull();
    expect(normalizeClientAddress(null)).toBeNull();
    expect(normalizeClientAddress("")).toBeNull();
  });

  it("serveBun and serveDeno listen on this machine only unless given a hostname", () => {
    expect(DEFAULT_HOSTNAME).toBe("127.0.0.1");
  });
});
