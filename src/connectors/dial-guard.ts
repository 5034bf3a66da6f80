import { lookup as dnsLookup } from "node:dns";
import { Socket, type TcpSocketConnectOpts } from "node:net";
import {
  type AddressPolicy,
  addressProblem,
  formatIpAddress,
  parseIpAddress,
  type Resolver,
} from "../domain/addresses.js";

/** What a connector dials with: the address rule, and (for tests, or a host's own DNS) the resolver. */
export interface DialOptions extends AddressPolicy {
  resolve?: Resolver | undefined;
}

/** A connection refused because of the address it would reach; its message says why. */
export class ForbiddenAddressError extends Error {
  readonly code = "ERR_FORBIDDEN_ADDRESS";
  /** The host as written, or a name with the address it resolved to (for logs; the message leaves it out). */
  readonly host: string;
  constructor(host: string, problem: string) {
    super(`the upstream's address is ${problem}, which connections may not reach`);
    this.name = "ForbiddenAddressError";
    this.host = host;
  }
}

/** A literal address (any spelling) that may not be dialled; null when allowed, or a name (judged once resolved). */
export function dialProblem(host: string, policy: AddressPolicy): ForbiddenAddressError | null {
  const address = parseIpAddress(host);
  const problem = address ? addressProblem(address, policy) : null;
  return problem === null ? null : new ForbiddenAddressError(host, problem);
}

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | Array<{ address: string; family: number }>,
  family?: number,
) => void;
type Lookup = (hostname: string, lookupOptions: object, callback: LookupCallback) => void;

/**
 * A `lookup` for `net.connect` and `http.request`: the name's addresses
 * are resolved, every one is judged, and the socket connects only to the
 * addresses judged (so a name that answers differently the second time, DNS
 * rebinding, cannot slip past: there is no second time). One forbidden
 * address refuses the name.
 */
export function guardedLookup(options: DialOptions): Lookup {
  const resolve = options.resolve ?? systemResolve;
  return (hostname, lookupOptions, callback) => {
    const wantsAll = (lookupOptions as { all?: boolean }).all === true;
    const family = (lookupOptions as { family?: unknown }).family;
    resolve(hostname).then(
      (found) => {
        const addresses = found.filter((a) => (family !== 4 && family !== 6 ? true : a.family === family));
        if (addresses.length === 0) {
          return callback(Object.assign(new Error(`${hostname} has no address`), { code: "ENOTFOUND" }), "", 0);
        }
        for (const { address } of addresses) {
          const parsed = parseIpAddress(address);
          const problem = parsed ? addressProblem(parsed, options) : `an address that does not parse (${address})`;
          if (problem !== null) {
            const dialled = `${hostname} (${parsed ? formatIpAddress(parsed) : address})`;
            return callback(new ForbiddenAddressError(dialled, problem), "", 0);
          }
        }
        if (wantsAll) callback(null, addresses);
        else callback(null, addresses[0]!.address, addresses[0]!.family);
      },
      (error: NodeJS.ErrnoException) => callback(error, "", 0),
    );
  };
}

function systemResolve(hostname: string): ReturnType<Resolver> {
  return new Promise((resolve, reject) => {
    dnsLookup(hostname, { all: true }, (error, addresses) =>
      error ? reject(error) : resolve(addresses.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }))),
    );
  });
}

/**
 * A socket factory for pg (its `stream` option): every connect is judged
 * before it happens. A literal address (which `net` dials without a lookup)
 * is judged as written; a name goes through `guardedLookup`; a local socket
 * path is a local connection (refused unless private addresses are allowed).
 */
export function guardedSocketFactory(options: DialOptions): () => Socket {
  const lookup = guardedLookup(options);
  class GuardedSocket extends Socket {
    override connect(...args: unknown[]): this {
      const [first, second] = args;
      let host: string | undefined;
      let port: number | undefined;
      if (typeof first === "object" && first !== null) {
        const given = first as { host?: string; port?: number; path?: string };
        if (given.path !== undefined) return this.local(given.path, args);
        host = given.host ?? "localhost";
        port = given.port;
      } else if (typeof first === "string" && !/^\d+$/.test(first)) {
        return this.local(first, args);
      } else {
        port = Number(first);
        host = typeof second === "string" ? second : "localhost";
      }
      // A literal address is dialled without a lookup: judged here, in whatever spelling.
      const refused = dialProblem(host, options);
      if (refused) return this.refuse(refused);
      return super.connect({ port: port ?? 5432, host, lookup: lookup as NonNullable<TcpSocketConnectOpts["lookup"]> });
    }

    private local(path: string, args: unknown[]): this {
      if (!options.allowPrivate) return this.refuse(new ForbiddenAddressError(path, "a local socket"));
      return (super.connect as (...a: unknown[]) => this)(...args);
    }

    private refuse(error: Error): this {
      process.nextTick(() => this.destroy(error));
      return this;
    }
  }
  return () => new GuardedSocket();
}
