import { conformValue } from "../domain/cell-values.js";
import type { Column, Row } from "../domain/model.js";
import { emptyRow } from "../domain/rows.js";
import { isReservedField } from "../domain/table-rows.js";
import { ApiError } from "../base/api-error.js";
import { validationFailed } from "./schemas.js";

/**
 * Stored rows under newly declared columns (admin-api.md, Revision 2: served
 * rows match declared columns). A row keeps only the declared columns, each
 * value converted to its column's type; the first value that does not
 * convert refuses the whole change with 409 `conflict`, and the store, which
 * applies the reshaping inside the write, then writes nothing.
 */

/** Whether rows stored under `before` need reshaping to stay true to `after`. */
export function columnsChanged(before: readonly Column[], after: readonly Column[]): boolean {
  if (before.length !== after.length) return true;
  return before.some((column, i) => column.name !== after[i]!.name || column.type !== after[i]!.type);
}

/** A dataset row under `columns`; `line` is its 1-based place in stored order, named by a refusal. */
export function reshapeDatasetRow(columns: readonly Column[]): (row: Row, line: number) => Row {
  return (row, line) => reshape(row, columns, { line }, false);
}

/**
 * An input-table row under `columns`: its `_id`, `_createdAt` and `_updatedAt` stay; a refusal names its `_id`.
 * A row holding a value in a column that is neither declared nor in `dropColumns` refuses the change (409).
 */
export function reshapeTableRow(columns: readonly Column[], dropColumns: readonly string[]): (row: Row) => Row {
  const lose = valuesLost(columns, dropColumns, true);
  return (row) => {
    const lost = lose(row);
    if (lost.length > 0) throw dropRefused(lost);
    return reshape(row, columns, { rowId: String(row._id) }, true);
  };
}

/**
 * The columns of a row that hold a value (anything but null) which
 * `columns` would drop without `dropColumns` naming them (admin-api.md,
 * Revision 3: dropping values is said out loud). An input table's reserved
 * fields (`keepReserved`) are kept, never dropped.
 */
export function valuesLost(
  columns: readonly Column[],
  dropColumns: readonly string[],
  keepReserved: boolean,
): (row: Row) => string[] {
  const kept = new Set([...columns.map((c) => c.name), ...dropColumns]);
  const droppable = (name: string) => !kept.has(name) && !(keepReserved && isReservedField(name));
  return (row) => Object.keys(row).filter((name) => droppable(name) && row[name] !== null && row[name] !== undefined);
}

/** 409 `conflict`: the declaration would drop the values of `names`, which the body did not list in `dropColumns`. */
export function dropRefused(names: readonly string[]): ApiError {
  const list = names.map((n) => JSON.stringify(n)).join(", ");
  const them = names.length === 1 ? "it" : "them";
  const message =
    `the new columns leave out ${list}, which hold values in stored rows; ` +
    `list ${them} in dropColumns to drop the values, or declare ${them}; nothing was changed`;
  return new ApiError(409, "conflict", message, { details: { dropColumns: [...names] } });
}

/** Declared columns: no name twice, and (tables) none of the reserved `_` names; 422 naming the column otherwise. */
export function checkDeclaredColumns(columns: readonly Column[], reservedPrefix: boolean): void {
  const names = new Set<string>();
  columns.forEach((column, i) => {
    if (reservedPrefix && column.name.startsWith("_"))
      throw validationFailed(`$.columns[${i}].name`, "names starting with _ are reserved");
    if (names.has(column.name)) throw validationFailed(`$.columns[${i}].name`, `duplicate column ${column.name}`);
    names.add(column.name);
  });
}

/** `dropColumns` goes with a `columns` declaration and names no declared column; 422 naming the entry otherwise. */
export function checkDropColumns(
  columns: readonly Column[] | null | undefined,
  dropColumns: readonly string[] | undefined,
): void {
  if (dropColumns === undefined || dropColumns.length === 0) return;
  if (!columns) throw validationFailed("$.dropColumns", "dropColumns goes with a columns declaration (those to keep)");
  const declared = new Set(columns.map((c) => c.name));
  dropColumns.forEach((name, i) => {
    const both = `${name} is declared in columns; a column is kept or dropped, not both`;
    if (declared.has(name)) throw validationFailed(`$.dropColumns[${i}]`, both);
  });
}

function reshape(
  row: Row,
  columns: readonly Column[],
  where: { line: number } | { rowId: string },
  keepReserved: boolean,
): Row {
  const out = emptyRow();
  if (keepReserved) for (const name of Object.keys(row)) if (isReservedField(name)) out[name] = row[name];
  for (const { name, type } of columns) {
    if (!Object.hasOwn(row, name)) continue;
    const value = row[name];
    const converted = conformValue(value, type);
    if (converted === undefined) {
      throw new ApiError(
        409,
        "conflict",
        `column ${JSON.stringify(name)} cannot become ${type ?? "untyped"}: a stored value does not convert; nothing was changed`,
        {
          details: { column: name, ...where, value },
        },
      );
    }
    out[name] = converted;
  }
  return out;
}
