import type { ApiSettings } from "../context/settings.js";
import type { Ports } from "../context/ports.js";
import { eventId } from "../domain/crypto.js";
import type { Actor } from "../domain/model.js";
import { isoTime } from "../domain/time.js";
import { ApiError } from "../base/api-error.js";
import type { Storage } from "../ports/storage.js";
import { ID_PATTERN, validationFailed } from "./schemas.js";

/** What every admin operation works with. */
export interface AdminDeps {
  ports: Ports;
  settings: ApiSettings;
}

/** Who makes a change: a host user (`X-Actor-User-Id` over HTTP), or the host itself when absent. */
export interface ChangeOptions {
  actorUserId?: string | null;
}

/** A put's outcome: `created` when nothing had the id before. */
export interface Put<T> {
  created: boolean;
  value: T;
}

/** One page of an admin listing. */
export interface ListPage<T> {
  data: T[];
  hasMore: boolean;
  /** Pass back as `cursor` for the next page; null on the last one. */
  nextCursor: string | null;
}

export interface ListOptions {
  /** 1 to 1000, default 100. */
  limit?: number;
  cursor?: string | null;
}

export const HOST_ACTOR: Actor = { type: "system", id: "host", name: "host application" };

/** The actor of a change: the named host user (422 when unknown), else the host. */
export async function actorFor(storage: Storage, options: ChangeOptions | undefined): Promise<Actor> {
  const userId = options?.actorUserId;
  if (userId === undefined || userId === null) return HOST_ACTOR;
  const user = typeof userId === "string" && userId !== "" ? await storage.identity.getUser(userId) : null;
  if (!user)
    throw new ApiError(422, "validation_failed", "X-Actor-User-Id names no known user", {
      details: { path: "X-Actor-User-Id" },
    });
  return { type: "user", id: user.id, email: user.email };
}

/**
 * Append the audit event of a change (`<object>.<created|updated|deleted>`),
 * one per team it concerns; an object of no team (a business without
 * teams, a user without memberships) is recorded with an empty team id.
 */
export async function recordChange(
  deps: AdminDeps,
  change: {
    teamIds: readonly string[];
    action: string;
    actor: Actor;
    target: { type: string; id: string };
    details?: Record<string, unknown>;
  },
): Promise<void> {
  const { storage, clock } = deps.ports;
  const now = clock.now();
  const teams = change.teamIds.length > 0 ? [...new Set(change.teamIds)] : [""];
  for (const teamId of teams) {
    await storage.audit.appendAuditEvent(
      {
        id: eventId(),
        time: isoTime(now),
        teamId,
        category: "audit",
        action: change.action,
        actor: change.actor,
        target: change.target,
        outcome: "success",
        ip: null,
        userAgent: null,
        ...(change.details ? { details: change.details } : {}),
      },
      now,
    );
  }
}

/** `<object>.created` or `<object>.updated`. */
export function putAction(object: string, created: boolean): string {
  return `${object}.${created ? "created" : "updated"}`;
}

/** A reference the body makes must name a stored object: 422 naming the field otherwise. */
export function requireRef<T>(found: T | null | undefined, path: string, what: string, value: string): T {
  if (found === null || found === undefined) throw validationFailed(path, `unknown ${what} ${value}`);
  return found;
}

/**
 * An id a change names (in the path or the body): a name, not a payload —
 * 1 to 200 letters, digits, `_`, `-`, `.` or `:` (`ID_PATTERN`). Anything
 * else is 422 naming `path`, never 404: the object cannot exist.
 */
export function checkId(id: unknown, path = "$.id"): string {
  if (typeof id !== "string" || !ID_PATTERN.test(id)) {
    throw validationFailed(path, "an id is 1 to 200 letters, digits, '_', '-', '.' or ':'");
  }
  return id;
}

/**
 * Admin puts of one object, one after another in this process (keyed by
 * store and object): a put that reads the object before writing it answers
 * `created` once when racing puts create it, on every store.
 */
export function serialised<T>(storage: Storage, key: string, run: () => Promise<T>): Promise<T> {
  let tails = PUT_TAILS.get(storage);
  if (!tails) PUT_TAILS.set(storage, (tails = new Map()));
  const queue = tails;
  const result = (queue.get(key) ?? Promise.resolve()).then(run);
  const tail = result.then(ignore, ignore);
  queue.set(key, tail);
  void tail.then(() => {
    if (queue.get(key) === tail) queue.delete(key);
  });
  return result;
}

/**
 * Not a cache: the puts in flight per store (an entry leaves when its last put ends), shared by every admin of that
 * store.
 */
const PUT_TAILS = new WeakMap<Storage, Map<string, Promise<void>>>();
const ignore = () => {};

const MAX_LIST_LIMIT = 1000;

/** Page through a collection in id order with an opaque cursor (the last id, base64url). */
export async function listPage<T extends { id: string }>(
  options: ListOptions | undefined,
  read: (page: { after: string | null; limit: number }) => Promise<T[]>,
): Promise<ListPage<T>> {
  const limit = options?.limit ?? 100;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
    throw new ApiError(400, "invalid_parameter", `limit is an integer from 1 to ${MAX_LIST_LIMIT}`, {
      details: { parameter: "limit" },
    });
  }
  const after = options?.cursor ? decodeListCursor(options.cursor) : null;
  const items = await read({ after, limit: limit + 1 });
  const data = items.slice(0, limit);
  const hasMore = items.length > limit;
  return { data, hasMore, nextCursor: hasMore ? encodeListCursor(data[data.length - 1]!.id) : null };
}

function encodeListCursor(id: string): string {
  return Buffer.from(`id:${id}`, "utf8").toString("base64url");
}

function decodeListCursor(cursor: string): string {
  const text = /^[A-Za-z0-9_-]{1,400}$/.test(cursor) ? Buffer.from(cursor, "base64url").toString("utf8") : "";
  if (!text.startsWith("id:") || text.length < 4) {
    throw new ApiError(
      400,
      "invalid_parameter",
      "cursor is not one this listing returned; send it back exactly as received",
      {
        details: { parameter: "cursor" },
      },
    );
  }
  return text.slice(3);
}

export function isoNow(deps: AdminDeps): string {
  return isoTime(deps.ports.clock.now());
}
