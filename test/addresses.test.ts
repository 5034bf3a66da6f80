import { describe, expect, it } from "vitest";
import { addressProblem, formatIpAddress, hostProblem, parseIpAddress } from "../src/domain/addresses.js";

const OPEN = { allowPrivate: true };
const STRICT = { allowPrivate: false };

describe("addresses as the system dials them", () => {
  it("reads every spelling of 169.254.169.254 that getaddrinfo and the WHATWG parser accept", () => {
    const spellings = [
      "169.254.169.254",
      "2852039166", // one 32-bit number
      "0xa9fea9fe", // hex
      "0XA9FEA9FE",
      "0251.0376.0251.0376", // octal parts
      "0xa9.0xfe.0xa9.0xfe",
      "169.254.43518", // the last part fills the bytes left
      "169.16689662",
      "169.254.169.254.", // trailing dot
      "[::ffff:169.254.169.254]",
      "::ffff:a9fe:a9fe",
      "[::ffff:0:a9fe:a9fe]", // IPv4-translated
      "[64:ff9b::a9fe:a9fe]", // NAT64
      "64:ff9b:1::a9fe:a9fe", // local-use NAT64
      "[::a9fe:a9fe]", // IPv4-compatible
      "0:0:0:0:0:ffff:169.254.169.254",
    ];
    for (const host of spellings) {
      const address = parseIpAddress(host);
      expect(address, host).not.toBeNull();
      expect(addressProblem(address!, OPEN), host).toMatch(/^a link-local address/);
    }
    expect(formatIpAddress(parseIpAddress("2852039166")!)).toBe("169.254.169.254");
  });

  it("reads 0 as 0.0.0.0 and ::, fe80::, ff02:: and 224.0.0.1 as forbidden whatever the policy", () => {
    expect(formatIpAddress(parseIpAddress("0")!)).toBe("0.0.0.0");
    expect(hostProblem("0", OPEN)).toMatch(/unspecified/);
    expect(hostProblem("0.0.0.0", OPEN)).toMatch(/unspecified/);
    expect(hostProblem("[::]", OPEN)).toMatch(/unspecified/);
    expect(hostProblem("fe80::1%eth0", OPEN)).toMatch(/link-local/);
    expect(hostProblem("[ff02::1]", OPEN)).toMatch(/multicast/);
    expect(hostProblem("224.0.0.1", OPEN)).toMatch(/multicast/);
    expect(hostProblem("0xe0000001", OPEN)).toMatch(/multicast/);
    expect(hostProblem("255.255.255.255", OPEN)).toMatch(/broadcast/);
    expect(hostProblem("[fd00:ec2::254]", OPEN)).toBe("a cloud metadata address");
    expect(hostProblem("100.100.100.200", OPEN)).toBe("a cloud metadata address");
  });

  it("allows loopback, private networks and names by default, and refuses them in every spelling when private addresses are not allowed", () => {
    const loopback = [
      "127.0.0.1",
      "2130706433",
      "0x7f000001",
      "0x7f.1",
      "127.1",
      "0177.0.0.1",
      "127.0.0.1.",
      "[::ffff:127.0.0.1]",
      "[::1]",
      "[64:ff9b::7f00:1]",
    ];
    const privateNets = ["10.0.0.5", "172.16.0.1", "192.168.1.1", "100.64.0.1", "[fd12::1]", "[::ffff:10.1.2.3]"];
    for (const host of [...loopback, ...privateNets, "db.internal", "localhost"])
      expect(hostProblem(host, OPEN), host).toBeNull();
    for (const host of loopback) expect(hostProblem(host, STRICT), host).toMatch(/loopback/);
    for (const host of privateNets) expect(hostProblem(host, STRICT), host).toMatch(/private|shared|unique local/);
    expect(hostProblem("localhost", STRICT)).toBe("a loopback name");
    expect(hostProblem("api.localhost.", STRICT)).toBe("a loopback name");
    for (const host of ["8.8.8.8", "134744072", "[2606:4700::1111]", "db.example.com"])
      expect(hostProblem(host, STRICT), host).toBeNull();
  });

  it("leaves what is not an address to DNS: names, and numbers no resolver reads as one", () => {
    for (const host of [
      "db.example.com",
      "1.2.3.4.5",
      "256.1.1.1",
      "0x1g",
      "4294967296",
      "09",
      "1..2",
      "::ffff::1",
      "1:2:3:4:5:6:7:8:9",
    ]) {
      expect(parseIpAddress(host), host).toBeNull();
    }
  });
});
