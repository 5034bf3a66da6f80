import type { AggregateAnswer, AggregateQuery, Metric } from "./aggregate-query.js";
import { exactSum } from "./exact-sum.js";
import type { Row } from "./model.js";
import { compareCodePoints, compareValues, matchesWhere, valueOf } from "./row-query-order.js";
import { canonicalJson, emptyRow } from "./rows.js";
import { timeBucket } from "./time-buckets.js";

/**
 * What an aggregate means, as one pass over rows: the memory store answers
 * with it, and it is the reference the SQL compilation (`src/sql/aggregate-compiler.ts`)
 * reproduces. Memory is bounded by the number of groups (each holds its
 * metrics' state; `countDistinct` the distinct values it has seen).
 */
export function evaluateAggregate(rows: Iterable<Row>, query: AggregateQuery): AggregateAnswer {
  const groups = new Map<string, Group>();
  const totals = query.metrics.map(accumulator);
  // Without keys there is one group, there even when no row matches.
  if (query.groupBy.length === 0) groups.set("", { keys: [], metrics: query.metrics.map(accumulator) });
  let matchedRows = 0;
  for (const row of rows) {
    if (query.where && !matchesWhere(row, query.where)) continue;
    matchedRows++;
    const keys = query.groupBy.map((k) =>
      k.bucket === null ? valueOf(row, k.column) : timeBucket(k.bucket, valueOf(row, k.column)),
    );
    // JSON equality: 5 and "5" differ; objects equal whatever their key order.
    const id = keys.map(canonicalJson).join(",");
    let group = groups.get(id);
    if (group === undefined) groups.set(id, (group = { keys, metrics: query.metrics.map(accumulator) }));
    else keys.forEach((key, i) => (group!.keys[i] = representative(group!.keys[i], key)));
    for (const m of group.metrics) m.add(row);
    for (const m of totals) m.add(row);
  }
  const answered: Row[] = [];
  for (const group of groups.values()) {
    const row = emptyRow();
    query.groupBy.forEach((k, i) => (row[k.name] = group.keys[i]));
    query.metrics.forEach((m, i) => (row[m.name] = group.metrics[i]!.result()));
    if (!query.having || matchesWhere(row, query.having)) answered.push(row);
  }
  answered.sort((a, b) => {
    for (const { column, descending } of query.order) {
      const c = compareValues(valueOf(a, column), valueOf(b, column), descending);
      if (c !== 0) return c;
    }
    return 0;
  });
  const total = emptyRow();
  query.metrics.forEach((m, i) => (total[m.name] = totals[i]!.result()));
  return {
    groups: answered.slice(query.offset, query.offset + query.limit),
    matchedRows,
    totalGroups: answered.length,
    totals: total,
  };
}

interface Group {
  keys: unknown[];
  metrics: Accumulator[];
}

/**
 * The value a group shows for a key: its members are JSON-equal, but
 * objects among them may order their keys differently; the one whose JSON
 * text is least (in code point order) is shown, and the group sorts by it.
 */
function representative(held: unknown, value: unknown): unknown {
  if (held === null || typeof held !== "object") return held;
  return compareCodePoints(JSON.stringify(value), JSON.stringify(held)) < 0 ? value : held;
}

interface Accumulator {
  add(row: Row): void;
  result(): unknown;
}

function accumulator(metric: Metric): Accumulator {
  const column = metric.column;
  if (column === null) {
    let rows = 0;
    return { add: () => void rows++, result: () => rows };
  }
  switch (metric.fn) {
    case "count": {
      let present = 0;
      return { add: (row) => void (valueOf(row, column) !== null && present++), result: () => present };
    }
    case "countDistinct": {
      const seen = new Set<string>();
      return {
        add(row) {
          const value = valueOf(row, column);
          if (value !== null) seen.add(canonicalJson(value));
        },
        result: () => seen.size,
      };
    }
    case "sum":
    case "avg": {
      // Numbers only: "12" is not 12.
      const sum = exactSum();
      let numbers = 0;
      return {
        add(row) {
          const value = valueOf(row, column);
          if (typeof value !== "number") return;
          sum.add(value);
          numbers++;
        },
        result() {
          if (numbers === 0) return null;
          const value = metric.fn === "sum" ? sum.total() : sum.mean(numbers);
          // Beyond the double range there is no JSON number to answer.
          return Number.isFinite(value) ? value : null;
        },
      };
    }
    case "min":
    case "max": {
      // The sort order of values: in numbers and strings, min is the least number and max the greatest string.
      const sign = metric.fn === "min" ? 1 : -1;
      let best: unknown = null;
      return {
        add(row) {
          const value = valueOf(row, column);
          if (value !== null && (best === null || sign * compareValues(value, best, false) < 0)) best = value;
        },
        result: () => best,
      };
    }
  }
}
