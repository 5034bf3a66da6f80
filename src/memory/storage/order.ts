import type { IdPage } from "../../ports/storage/identity.js";

/** Binary (code unit) order, what every listing of the memory store sorts by. */
export function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** One keyset page of a collection: ids after `page.after`, in id order, at most `page.limit`. */
export function pageById<T extends { id: string }>(items: Iterable<T>, page: IdPage): T[] {
  const { after, limit } = page;
  return [...items]
    .filter((item) => after === null || item.id > after)
    .sort((a, b) => compare(a.id, b.id))
    .slice(0, limit);
}
