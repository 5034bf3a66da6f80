import type { StandardSchemaV1 } from "@standard-schema/spec";
import { valueFitsType } from "./columns.js";
import type { Row, TableRecord } from "./model.js";
import { isReservedField } from "./table-rows.js";

/**
 * Host-supplied validators of one input table, through Standard Schema (zod,
 * valibot, arktype…). Validators judge a write; their output value is never
 * stored (a parsing library may drop keys such as `__proto__`).
 */
export interface TableSchemas {
  /** Per column: run on the column's value whenever a write sets it. */
  columns?: Readonly<Record<string, StandardSchemaV1>>;
  /** Whole row: run on the row's column values as they will be stored (after a PATCH is merged). */
  row?: StandardSchemaV1;
}

/** One reason a value was refused. `column` is absent for a problem of the row as a whole. */
export interface ValidationIssue {
  column?: string;
  path: Array<string | number>;
  message: string;
}

/** A refused write: the 422 `validation_failed` message and details. */
export interface ValidationProblem {
  message: string;
  details: Record<string, unknown>;
}

/**
 * The structural checks every table write passes, in this order: no
 * `_`-prefixed field; only declared columns (when the table declares any);
 * each value fits its declared column's type. Returns the first failing
 * check's problem, or null.
 */
export function checkColumns(table: Pick<TableRecord, "columns">, values: Row): ValidationProblem | null {
  const names = Object.keys(values);
  const reserved = names.filter(isReservedField);
  if (reserved.length > 0) {
    return {
      message: `${columnList(reserved)} ${reserved.length === 1 ? "is" : "are"} reserved: fields starting with _ are set by Dataport`,
      details: { reservedColumns: reserved },
    };
  }
  if (table.columns.length === 0) return null;
  const declared = new Map(table.columns.map((c) => [c.name, c.type] as const));
  const unknown = names.filter((name) => !declared.has(name));
  if (unknown.length > 0) {
    return {
      message: `unknown ${unknown.length === 1 ? "column" : "columns"} ${columnList(unknown)}; the table declares ${columnList([...declared.keys()])}`,
      details: { unknownColumns: unknown, declaredColumns: [...declared.keys()] },
    };
  }
  const issues: ValidationIssue[] = [];
  for (const name of names) {
    const type = declared.get(name) ?? null;
    if (!valueFitsType(values[name], type))
      issues.push({ column: name, path: [], message: `expected a ${type} value or null` });
  }
  return issues.length > 0 ? invalid(issues) : null;
}

/**
 * Run the host's validators: each column validator on the values being
 * written (`written`), then the row validator on the row as it will be
 * stored (`row`). Every issue is collected. Validators receive a copy.
 */
export async function checkSchemas(
  schemas: TableSchemas | undefined,
  written: Row,
  row: Row,
): Promise<ValidationProblem | null> {
  if (!schemas) return null;
  const issues: ValidationIssue[] = [];
  const columns = schemas.columns ?? {};
  for (const name of Object.keys(written)) {
    if (!Object.hasOwn(columns, name)) continue;
    const result = await columns[name]!["~standard"].validate(copy(written[name]));
    for (const issue of result.issues ?? []) issues.push({ column: name, path: pathOf(issue), message: issue.message });
  }
  if (schemas.row) {
    const result = await schemas.row["~standard"].validate(copy(row));
    for (const issue of result.issues ?? []) {
      const path = pathOf(issue);
      const head = path[0];
      issues.push(
        typeof head === "string"
          ? { column: head, path: path.slice(1), message: issue.message }
          : { path, message: issue.message },
      );
    }
  }
  return issues.length > 0 ? invalid(issues) : null;
}

/** The validators a host attached to a table, if any (own properties only: ids are untrusted). */
export function schemasFor(all: Readonly<Record<string, TableSchemas>>, tableId: string): TableSchemas | undefined {
  return Object.hasOwn(all, tableId) ? all[tableId] : undefined;
}

function invalid(issues: ValidationIssue[]): ValidationProblem {
  const invalidColumns = [...new Set(issues.flatMap((i) => (i.column === undefined ? [] : [i.column])))];
  const first = issues.find((i) => i.column !== undefined) ?? issues[0]!;
  const message =
    invalidColumns.length > 0
      ? `invalid value for ${invalidColumns.length === 1 ? "column" : "columns"} ${columnList(invalidColumns)}: ${first.message}`
      : `invalid row: ${first.message}`;
  return { message, details: { invalidColumns, issues } };
}

function columnList(names: readonly string[]): string {
  return names.map((n) => JSON.stringify(n)).join(", ");
}

function pathOf(issue: StandardSchemaV1.Issue): Array<string | number> {
  return (issue.path ?? []).map((segment) => {
    const key = typeof segment === "object" && segment !== null ? segment.key : segment;
    return typeof key === "number" ? key : String(key);
  });
}

/** A JSON copy, so a validator can neither mutate the write nor see a null-prototype object. */
function copy(value: unknown): unknown {
  return value === undefined ? undefined : JSON.parse(JSON.stringify(value));
}
