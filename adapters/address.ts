/**
 * The client address as the core should store and compare it. A dual-stack
 * listener (Node's `::`, Bun's and Deno's default) reports an IPv4 peer as an
 * IPv4-mapped IPv6 address, `::ffff:127.0.0.1`; that is the IPv4 address
 * `127.0.0.1`, and every adapter reports it so, so webhook rows, logs and
 * allowlists see one spelling whatever the listener. Anything else is kept as
 * the runtime gave it; no address is null.
 */
export function normalizeClientAddress(address: string | null | undefined): string | null {
  if (address === undefined || address === null || address === "") return null;
  const mapped = IPV4_MAPPED.exec(address);
  return mapped ? mapped[1]! : address;
}

const IPV4_MAPPED = /^::ffff:(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})$/i;

/** Where `serveBun` and `serveDeno` listen unless given a `hostname`: this machine only. */
export const DEFAULT_HOSTNAME = "127.0.0.1";
