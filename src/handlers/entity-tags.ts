import { hash } from "node:crypto";
import type { DatasetRecord, Row, TableRecord } from "../domain/model.js";
import { canonicalJson } from "../domain/rows.js";
import { strongTag } from "../http/conditional.js";

/**
 * The entity tags of reads, worked out without reading a row.
 *
 * A read of rows is a function of its target's record and the request: the
 * record (a dataset's or an input table's) changes with every write of its
 * rows — `updatedAt` is the write's time, `rowCount` follows — and holds
 * everything else a page shows (name, columns and their types,
 * `lastRefreshedAt`). So the tag of a page hashes the record and the
 * request's parameters (paging, columns, filters, `where`, `sort`, `cursor`,
 * the format); an unchanged dataset gives the same tag, and `If-None-Match`
 * can be answered 304 before any row is read.
 *
 * One case would let two versions share a tag: two writes stamped in the
 * same millisecond (by instances whose clocks agree) that leave the record
 * otherwise equal (a webhook connection at its retention limit, two
 * same-sized replaces). A read between them would tag the first version, and
 * a revalidation after the second would wrongly be told "not modified". So a
 * record written less than SETTLE_MS ago (by the clock, allowing for skew
 * between instances) gets no tag: its answers are complete, and tagged once
 * no write can still share its stamp.
 */
export const SETTLE_MS = 2000;

/** The tag of a rows read (null: the target changed too recently to be tagged). */
export function rowsTag(target: DatasetRecord | TableRecord, request: object, now: number): string | null {
  if (!settledRecord(target, now)) return null;
  // A remembered record's tags by the request's own JSON (its parameters in the order they came): the same
  // request asked again is tagged without sorting or hashing; the tag itself hashes the canonical text, so the
  // same request with its keys in another order is tagged alike.
  const known = Object.isFrozen(target) ? tagsOf(target) : null;
  const asked = known === null ? "" : JSON.stringify(request);
  const found = known?.get(asked);
  if (found !== undefined) return found;
  const tag = strongTag(digest(`${recordText(target)}\n${canonicalJson(request)}`));
  if (known) {
    if (known.size >= TAGS_PER_RECORD) known.delete(known.keys().next().value!);
    known.set(asked, tag);
  }
  return tag;
}

/** The tag of a JSON answer already written (a dataset's own read): its text's hash. */
export function textTag(text: string): string {
  return strongTag(digest(text));
}

/**
 * A table row's tag: its `_updatedAt`, which strictly increases with every
 * write to the row, so `If-Match` can carry it back as the HTTP form of
 * `expectedUpdatedAt`. Null for a row whose stamp is not such text.
 */
export function rowTag(row: Row): string | null {
  const stamp = row._updatedAt;
  return typeof stamp === "string" && /^[\x21\x23-\x7e]{1,64}$/.test(stamp) ? strongTag(stamp) : null;
}

/** The `_updatedAt` a row tag names, or null when the tag is not a row's. */
export function stampOfRowTag(tag: string): string | null {
  return /^"[\x21\x23-\x7e]{1,64}"$/.test(tag) ? tag.slice(1, -1) : null;
}

/**
 * Whether no write can still share the record's stamps. Once a remembered (frozen) record is, it stays so: a later
 * write makes a new record.
 */
function settledRecord(target: DatasetRecord | TableRecord, now: number): boolean {
  if (settledRecords.has(target)) return true;
  const { updatedAt, lastRefreshedAt } = target as Partial<DatasetRecord> & TableRecord;
  if (!settled(updatedAt, now) || (lastRefreshedAt != null && !settled(lastRefreshedAt, now))) return false;
  if (Object.isFrozen(target)) settledRecords.add(target);
  return true;
}

const settledRecords = new WeakSet<object>();

function settled(stamp: string, now: number): boolean {
  const at = Date.parse(stamp);
  return !Number.isNaN(at) && now - at >= SETTLE_MS;
}

/**
 * A record's canonical text. A store that remembers records (SQLite) hands
 * the same frozen record to every read until it changes: its text is worked
 * out once per record.
 */
function recordText(record: DatasetRecord | TableRecord): string {
  const known = texts.get(record);
  if (known !== undefined) return known;
  const text = canonicalJson(record);
  if (Object.isFrozen(record)) texts.set(record, text);
  return text;
}

const texts = new WeakMap<object, string>();

/**
 * The tags of a frozen (remembered) record's reads, by the request's JSON:
 * the same page asked again is tagged without hashing. At most
 * TAGS_PER_RECORD requests per record, the oldest forgotten first; they go
 * with the record.
 */
function tagsOf(record: object): Map<string, string> {
  let tags = tagsByRecord.get(record);
  if (tags === undefined) tagsByRecord.set(record, (tags = new Map()));
  return tags;
}

const tagsByRecord = new WeakMap<object, Map<string, string>>();
const TAGS_PER_RECORD = 32;

/** 128 bits of SHA-256, base64url (22 characters, within etagc); one-shot, no Hash object. */
function digest(text: string): string {
  return hash("sha256", text, "base64url").slice(0, 22);
}
