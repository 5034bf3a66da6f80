import type { Column } from "../domain/model.js";

/**
 * The typed copy of a dataset's declared columns that aggregates read
 * (issue #39), what the SQLite and PostgreSQL stores share: which columns it
 * holds, in which slot.
 *
 * Rows are kept as JSON text (their key order is part of the row), so an
 * aggregate over them parses every row, and a time bucket reads a date's text
 * anew on each run. For a dataset with DECLARED columns the stores keep, beside
 * each row, its declared columns' values in slots (`v<i>`), one SQL value per
 * JSON value, and for (the first four) `date` and `datetime` columns the
 * value's UTC hour (`h<j>`, `YYYY-MM-DDTHH`) and the Monday of its ISO week
 * (`w<j>`) as the reference (`time-buckets.ts`) computes them, or NULL. The
 * copy holds values by column name whatever the declared types say (a number
 * column holding a string holds that string): a layout that no longer
 * matches the declaration is slower, never wrong. The stores' triggers
 * keep the copy on every write of the rows (see the stores' dataset-values.ts).
 * An aggregate whose columns (keys, metrics, `where` and `filters`) are all
 * in the copy reads the copy; any other reads the JSON.
 */

/** Slots of the copy: the first SLOTS declared columns (whose names a JSON path can hold) are copied. */
export const SLOTS = 16;

/** Of those, the first TIME_SLOTS date and datetime columns have their buckets stored. */
export const TIME_SLOTS = 4;

/** A column of the copy: its slot (`v<slot>`), and the slot of its stored buckets (`h<times>`, `w<times>`) or null. */
export interface Slot {
  slot: number;
  times: number | null;
}

/** The copy's columns by name, and its text as stored (what tells two layouts apart). */
export interface ValueLayout {
  slots: ReadonlyMap<string, Slot>;
  text: string;
}

/** The layout of a dataset's copy for its declared `columns` (null: undeclared, no copy). */
export function valueLayout(
  columns: readonly Column[] | null,
  copyable: (name: string) => boolean,
): ValueLayout | null {
  if (columns === null) return null;
  const taken = [...new Map(columns.filter((c) => copyable(c.name)).map((c) => [c.name, c] as const)).values()].slice(
    0,
    SLOTS,
  );
  if (taken.length === 0) return null;
  let timed = 0;
  const entries = taken.map((c, slot): [string, Slot] => {
    const times = (c.type === "date" || c.type === "datetime") && timed < TIME_SLOTS ? timed++ : null;
    return [c.name, { slot, times }];
  });
  return { slots: new Map(entries), text: JSON.stringify(entries.map(([name, s]) => [name, s.times])) };
}

/** A layout from its stored text. */
export function parseValueLayout(text: string): ValueLayout {
  const entries = (JSON.parse(text) as Array<[string, number | null]>).map(([name, times], slot): [string, Slot] => [
    name,
    { slot, times },
  ]);
  return { slots: new Map(entries), text };
}

/** The copy's columns in slot order, and its date columns in time-slot order, as the stores' layout rows list them. */
export function slotNames(layout: ValueLayout): { values: Array<string | null>; times: Array<string | null> } {
  const values: Array<string | null> = SLOT_NUMBERS.map(() => null);
  const times: Array<string | null> = TIME_SLOT_NUMBERS.map(() => null);
  for (const [name, s] of layout.slots) {
    values[s.slot] = name;
    if (s.times !== null) times[s.times] = name;
  }
  return { values, times };
}

/** The copy's slots of `names` (every one of them), or null when one is not in the copy. */
export function slotsOf(layout: ValueLayout | null, names: readonly string[]): Map<string, Slot> | null {
  if (layout === null) return null;
  const out = new Map<string, Slot>();
  for (const name of names) {
    const slot = layout.slots.get(name);
    if (!slot) return null;
    out.set(name, slot);
  }
  return out;
}

/** The slot numbers 0 … SLOTS - 1. */
export const SLOT_NUMBERS: readonly number[] = Array.from({ length: SLOTS }, (_, i) => i);
export const TIME_SLOT_NUMBERS: readonly number[] = Array.from({ length: TIME_SLOTS }, (_, i) => i);
