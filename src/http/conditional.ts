/**
 * Conditional requests (RFC 9110, section 13): entity tags as `ETag`
 * carries them, and the `If-None-Match` / `If-Match` lists that name them.
 *
 * A representation the server compresses (src/http/compression.ts) carries
 * its tag with the coding appended (`"abc-gzip"`): a strong tag names one
 * sequence of bytes, so the compressed answer needs a tag of its own. A
 * client revalidating it sends that tag back; `ifNoneMatch` compares the tag
 * of the content, with any such suffix removed.
 */

/** Suffixes `withCoding` appends, one per content coding the server applies. */
const CODING_SUFFIX = /-(?:gzip|br)"$/;

/** A strong entity tag of `opaque` (its characters already within RFC 9110's etagc). */
export function strongTag(opaque: string): string {
  return `"${opaque}"`;
}

/** The tag of the same content sent with a content coding: `"abc"` → `"abc-gzip"`. Weak tags are left as they are. */
export function withCoding(tag: string, coding: "gzip" | "br"): string {
  return tag.startsWith('"') ? `${tag.slice(0, -1)}-${coding}"` : tag;
}

/**
 * `If-None-Match` against the current tag of the content (weak comparison, as
 * RFC 9110 asks for it): the tag the client sent that matched, which the 304
 * carries as its `ETag`, or null when none did (or the header is absent or
 * unreadable: the request is then answered in full).
 */
export function ifNoneMatch(header: string | null, current: string): string | null {
  if (header === null) return null;
  if (header.trim() === "*") return current;
  const opaque = current.slice(current.indexOf('"'));
  for (const sent of entityTags(header)) {
    const bare = sent.startsWith("W/") ? sent.slice(2) : sent;
    if (bare === opaque || bare.replace(CODING_SUFFIX, '"') === opaque) return sent;
  }
  return null;
}

/**
 * An `If-Match` header as a condition: `any` for `*`, else the strong tags it
 * lists (weak ones can never match: RFC 9110 compares strongly here). Null
 * when the header is absent.
 */
export function ifMatchCondition(header: string | null): { any: true } | { any: false; tags: readonly string[] } | null {
  if (header === null) return null;
  if (header.trim() === "*") return { any: true };
  return { any: false, tags: entityTags(header).filter((tag) => !tag.startsWith("W/")) };
}

/** Whether an `If-Match` condition holds for the current tag (null: the resource has none, so only `*` could hold). */
export function ifMatchHolds(condition: { any: true } | { any: false; tags: readonly string[] }, current: string | null): boolean {
  if (condition.any) return true;
  return current !== null && condition.tags.includes(current);
}

/** The entity tags of a list header, as sent (`"a"`, `W/"b"`); anything else in it is skipped. */
function entityTags(header: string): string[] {
  return header.match(/(?:W\/)?"[\x21\x23-\x7e\x80-\xff]*"/g) ?? [];
}
