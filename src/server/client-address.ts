import type { HeaderReader } from "../base/headers.js";

/**
 * The client address: the peer as the adapter reports it, unless the peer is
 * a trusted proxy, in which case the right-most X-Forwarded-For entry that is
 * not itself a trusted proxy. X-Forwarded-For is read only from a trusted peer.
 */
export function resolveClientAddress(
  peer: string | null,
  headers: HeaderReader,
  trustedProxies: readonly string[],
): string | null {
  if (!peer || trustedProxies.length === 0 || !isTrusted(peer, trustedProxies)) return peer;
  const forwardedFor = headers.get("x-forwarded-for");
  if (!forwardedFor) return peer;
  const hops = forwardedFor
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  for (let i = hops.length - 1; i >= 0; i--) {
    if (!isTrusted(hops[i]!, trustedProxies)) return hops[i]!;
  }
  return hops[0] ?? peer;
}

function isTrusted(address: string, trusted: readonly string[]): boolean {
  const plain = address.startsWith("::ffff:") ? address.slice(7) : address;
  return trusted.includes(address) || trusted.includes(plain);
}
