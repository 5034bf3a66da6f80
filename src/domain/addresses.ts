/**
 * Network addresses as the operating system dials them (admin-api.md,
 * Revision 3: connection addresses are judged as they will be dialled).
 *
 * A host name reaches an address by many spellings: `getaddrinfo` reads an
 * IPv4 address the way `inet_aton` does (`2852039166`, `0xa9fea9fe`,
 * `0251.0376.0251.0376`, `169.254.43518`, `0`), the WHATWG URL parser
 * likewise, an IPv6 address may carry an IPv4 one inside (`::ffff:a9fe:a9fe`,
 * `64:ff9b::a9fe:a9fe`), and a trailing dot changes nothing. Every spelling
 * is brought to one form here before any rule is applied to it.
 */

/** An IP address: IPv4 as four bytes, IPv6 as eight 16-bit groups. */
export type IpAddress = { version: 4; bytes: readonly number[] } | { version: 6; groups: readonly number[] };

/** Which addresses a connection may reach: every one but the forbidden, or only public ones. */
export interface AddressPolicy {
  /** Loopback and private networks (and local sockets) allowed; true unless the host says otherwise. */
  allowPrivate: boolean;
}

/** How a host name becomes addresses, as `dns.lookup(name, { all: true })` answers them. */
export type Resolver = (hostname: string) => Promise<Array<{ address: string; family: 4 | 6 }>>;

/**
 * The address a host name spells, when it spells one (brackets, an IPv6
 * zone and one trailing dot allowed); null for a name that DNS resolves.
 */
export function parseIpAddress(host: string): IpAddress | null {
  let text = host.trim().toLowerCase();
  if (text.startsWith("[") && text.endsWith("]")) text = text.slice(1, -1);
  if (text.includes(":")) {
    const groups = parseIPv6(text.replace(/%.*$/, ""));
    return groups ? { version: 6, groups } : null;
  }
  const value = parseIPv4(text.endsWith(".") ? text.slice(0, -1) : text);
  if (value === null) return null;
  return { version: 4, bytes: [value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255] };
}

/**
 * Why a connection may not reach `address`, or null when it may: never a
 * link-local (cloud metadata services), unspecified, multicast, broadcast or
 * reserved address, nor a known metadata address; without `allowPrivate`,
 * neither loopback nor a private network. An IPv6 address carrying an IPv4
 * one (mapped, translated, NAT64, compatible) is judged by that IPv4 address.
 */
export function addressProblem(address: IpAddress, policy: AddressPolicy): string | null {
  const v4 = address.version === 4 ? address.bytes : embeddedIPv4(address.groups);
  if (v4) return ipv4Problem(v4, policy);
  return ipv6Problem(address.version === 6 ? address.groups : [], policy);
}

/** `addressProblem` of a host as written: null for a name (its addresses are judged when it is resolved). */
export function hostProblem(host: string, policy: AddressPolicy): string | null {
  const address = parseIpAddress(host);
  if (address) return addressProblem(address, policy);
  if (!policy.allowPrivate && isLocalName(host)) return "a loopback name";
  return null;
}

/** The address in its usual text form (`169.254.169.254`, `::ffff:a9fe:a9fe`), for messages and logs. */
export function formatIpAddress(address: IpAddress): string {
  if (address.version === 4) return address.bytes.join(".");
  return address.groups.map((g) => g.toString(16)).join(":");
}

/** `localhost` and its subdomains (RFC 6761): the resolver answers loopback without asking DNS. */
function isLocalName(host: string): boolean {
  const name = host.trim().toLowerCase().replace(/\.$/, "");
  return name === "localhost" || name.endsWith(".localhost");
}

function ipv4Problem([a, b, c, d]: readonly number[], policy: AddressPolicy): string | null {
  if (a === 0) return "an unspecified address (0.0.0.0/8)";
  if (a === 169 && b === 254) return "a link-local address (169.254.0.0/16, cloud metadata services)";
  if (a! >= 224 && a! <= 239) return "a multicast address (224.0.0.0/4)";
  if (a! >= 240) return "a reserved or broadcast address (240.0.0.0/4)";
  if (a === 100 && b === 100 && c === 100 && d === 200) return "a cloud metadata address";
  if (policy.allowPrivate) return null;
  if (a === 127) return "a loopback address (127.0.0.0/8)";
  const rfc1918 = a === 10 || (a === 172 && b! >= 16 && b! <= 31) || (a === 192 && b === 168);
  if (rfc1918) return "a private address (RFC 1918)";
  if (a === 100 && b! >= 64 && b! <= 127) return "a shared address (100.64.0.0/10)";
  if (a === 192 && b === 0 && c === 0) return "an IETF protocol address (192.0.0.0/24)";
  if (a === 198 && (b === 18 || b === 19)) return "a benchmarking address (198.18.0.0/15)";
  return null;
}

function ipv6Problem(groups: readonly number[], policy: AddressPolicy): string | null {
  const [first] = groups as [number];
  if (groups.every((g) => g === 0)) return "the unspecified address (::)";
  if ((first & 0xffc0) === 0xfe80) return "a link-local address (fe80::/10)";
  if ((first & 0xffc0) === 0xfec0) return "a site-local address (fec0::/10)";
  if ((first & 0xff00) === 0xff00) return "a multicast address (ff00::/8)";
  // AWS's instance metadata service over IPv6.
  if (formatIpAddress({ version: 6, groups }) === "fd00:ec2:0:0:0:0:0:254") return "a cloud metadata address";
  if (policy.allowPrivate) return null;
  if (groups.slice(0, 7).every((g) => g === 0) && groups[7] === 1) return "the loopback address (::1)";
  if ((first & 0xfe00) === 0xfc00) return "a unique local address (fc00::/7)";
  return null;
}

/**
 * The IPv4 address an IPv6 address stands for, where a host or a translator
 * on the path would dial that IPv4 address: IPv4-mapped `::ffff:0:0/96`,
 * IPv4-translated `::ffff:0:0:0/96`, IPv4-compatible `::/96`, and NAT64
 * `64:ff9b::/96` and `64:ff9b:1::/48` (the address in the last 32 bits).
 */
function embeddedIPv4(groups: readonly number[]): number[] | null {
  const [g0, g1, g2, g3, g4, g5, g6, g7] = groups as [number, number, number, number, number, number, number, number];
  const last = [g6 >> 8, g6 & 255, g7 >> 8, g7 & 255];
  const zeros = (...gs: number[]) => gs.every((g) => g === 0);
  if (zeros(g0, g1, g2, g3, g4) && g5 === 0xffff) return last;
  if (zeros(g0, g1, g2, g3) && g4 === 0xffff && g5 === 0) return last;
  // `::` and `::1` are IPv6's own; anything else in ::/96 is IPv4-compatible.
  if (zeros(g0, g1, g2, g3, g4, g5) && (g6 !== 0 || g7 > 1)) return last;
  if (g0 === 0x64 && g1 === 0xff9b && zeros(g2, g3, g4, g5)) return last;
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 1) return last;
  return null;
}

/**
 * IPv4 as `inet_aton` and the WHATWG URL parser read it: one to four parts,
 * each decimal, hex (`0x`) or octal (a leading `0`); the last part fills the
 * bytes the others left (`127.1` is 127.0.0.1, `2852039166` 169.254.169.254).
 */
function parseIPv4(text: string): number | null {
  if (text === "") return null;
  const parts = text.split(".");
  if (parts.length > 4) return null;
  const numbers: number[] = [];
  for (const part of parts) {
    const value = ipv4Number(part);
    if (value === null) return null;
    numbers.push(value);
  }
  const last = numbers.pop()!;
  if (numbers.some((n) => n > 255) || last >= 256 ** (4 - numbers.length)) return null;
  return numbers.reduce((sum, n, i) => sum + n * 256 ** (3 - i), 0) + last;
}

function ipv4Number(part: string): number | null {
  if (/^0x[0-9a-f]*$/.test(part)) return part.length === 2 ? 0 : Number.parseInt(part.slice(2), 16);
  if (/^0[0-7]+$/.test(part)) return Number.parseInt(part.slice(1), 8);
  if (/^(0|[1-9][0-9]*)$/.test(part)) return Number(part);
  return null;
}

/** Eight groups, or null: `::` once at most, an IPv4 tail in dotted decimal. */
function parseIPv6(text: string): number[] | null {
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const side = (half: string): number[] | null => {
    if (half === "") return [];
    const groups: number[] = [];
    const pieces = half.split(":");
    for (let i = 0; i < pieces.length; i++) {
      const piece = pieces[i]!;
      if (i === pieces.length - 1 && piece.includes(".")) {
        const bytes = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(piece)?.slice(1).map(Number);
        if (!bytes || bytes.some((n) => n > 255)) return null;
        groups.push(bytes[0]! * 256 + bytes[1]!, bytes[2]! * 256 + bytes[3]!);
      } else {
        if (!/^[0-9a-f]{1,4}$/.test(piece)) return null;
        groups.push(Number.parseInt(piece, 16));
      }
    }
    return groups;
  };
  const head = side(halves[0]!);
  const tail = halves.length === 2 ? side(halves[1]!) : [];
  if (!head || !tail) return null;
  if (halves.length === 1) return head.length === 8 ? head : null;
  if (head.length + tail.length > 7) return null;
  return [...head, ...Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}
