import type { Column, Row } from "../../domain/model.js";
import type { Storage } from "../../ports/storage.js";
import type { DatasetRowsWrite, RowQuery } from "../../ports/storage/rows.js";
import { tick } from "./harness.js";

/** What the catalog and rows suites share: the rows they write and read, and how they stream them. */
export async function collect(rows: AsyncIterable<Row>): Promise<Row[]> {
  const out: Row[] = [];
  for await (const row of rows) out.push({ ...row });
  return out;
}

export const all: RowQuery = { offset: 0, limit: null, columns: null, filters: null };
export const rowsOf = async (store: Storage, datasetId: string) =>
  collect((await store.rows.readDatasetRows(datasetId, all)).rows);

export const ORDERS: Row[] = [
  { order_id: "A-1", amount: 12.5, region: "EMEA" },
  { order_id: "A-2", amount: 30, region: "AMER" },
  { order_id: "A-3", amount: 7.25, region: "EMEA" },
  { order_id: "A-4", amount: 99, region: "APAC" },
  { order_id: "A-5", amount: 1, region: "EMEA" },
];
export const NEW_COLUMNS: Column[] = [
  { name: "order_id", type: "string" },
  { name: "amount", type: "number" },
  { name: "note", type: "string" },
];
export const UPDATED_AT = "2026-11-01T12:00:00.000Z";

/** A one-shot gate: `open()` lets everything awaiting `opened` continue. */
export function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/**
 * Rows as a stream, each after a pause (so concurrent work interleaves). With
 * `hold`, the stream stops before row `hold.before` until the gate opens,
 * after telling `hold.reached`; with `failAfter`, it throws after that many rows.
 */
export async function* stream(
  rows: readonly Row[],
  options: { hold?: { before: number; reached: () => void; until: Promise<void> }; failAfter?: number } = {},
) {
  for (let i = 0; i < rows.length; i++) {
    if (options.failAfter === i) throw new Error("the upload broke off");
    if (options.hold?.before === i) {
      options.hold.reached();
      await options.hold.until;
    }
    await tick();
    yield { ...rows[i]! };
  }
  if (options.failAfter === rows.length) throw new Error("the upload broke off");
}

/**
 * A bulk write of `rows`; `columnsCalls` records, for each call of `columns()`, whether the rows had all been read by
 * then.
 */
export function bulk(
  store: Storage,
  datasetId: string,
  mode: DatasetRowsWrite["mode"],
  rows: AsyncIterable<Row>,
  columns: Column[] = NEW_COLUMNS,
) {
  const columnsCalls: boolean[] = [];
  let finished = false;
  async function* watched() {
    yield* rows;
    finished = true;
  }
  const done = store.rows.writeDatasetRows({
    datasetId,
    mode,
    rows: watched(),
    columns: () => {
      columnsCalls.push(finished);
      return columns;
    },
    updatedAt: UPDATED_AT,
  });
  return { done, columnsCalls };
}
