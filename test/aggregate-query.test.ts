import { describe, expect, it } from "vitest";
import { ApiError } from "../src/base/api-error.js";
import { type AggregateParams, parseAggregateQuery } from "../src/domain/aggregate-query.js";

const COLUMNS = new Set(["region", "ordered_on", "amount", "order date", "customer"]);

/** The refusal a request gets: status, code and details of the ApiError, with its message. */
function refusal(params: AggregateParams, columns: ReadonlySet<string> = COLUMNS) {
  try {
    parseAggregateQuery(params, columns);
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    return { status: error.status, code: error.code, message: error.message, details: error.details };
  }
  throw new Error("not refused");
}

describe("parseAggregateQuery", () => {
  it("reads keys, buckets and metrics as written, spaces around their parts removed", () => {
    const query = parseAggregateQuery(
      {
        groupBy: " region , month( ordered_on ),order date",
        metrics: "count, sum(amount),avg( amount ),countDistinct(customer),count(amount)",
      },
      COLUMNS,
    );
    expect(query.groupBy).toEqual([
      { name: "region", column: "region", bucket: null },
      { name: "month(ordered_on)", column: "ordered_on", bucket: "month" },
      { name: "order date", column: "order date", bucket: null },
    ]);
    expect(query.metrics).toEqual([
      { name: "count", fn: "count", column: null },
      { name: "sum(amount)", fn: "sum", column: "amount" },
      { name: "avg(amount)", fn: "avg", column: "amount" },
      { name: "countDistinct(customer)", fn: "countDistinct", column: "customer" },
      { name: "count(amount)", fn: "count", column: "amount" },
    ]);
  });

  it("defaults: one group, count, every row, keys ascending, 1000 groups from the first", () => {
    expect(parseAggregateQuery({}, COLUMNS)).toEqual({
      groupBy: [],
      metrics: [{ name: "count", fn: "count", column: null }],
      where: null,
      having: null,
      order: [],
      limit: 1000,
      offset: 0,
    });
    expect(parseAggregateQuery({ groupBy: "region,year(ordered_on)" }, COLUMNS).order).toEqual([
      { column: "region", descending: false },
      { column: "year(ordered_on)", descending: false },
    ]);
  });

  it("orders by the sort asked, then by every key it leaves out, ascending", () => {
    const query = parseAggregateQuery(
      { groupBy: "region,month(ordered_on)", metrics: "sum(amount)", sort: "-sum( amount ),-month(ordered_on)" },
      COLUMNS,
    );
    expect(query.order).toEqual([
      { column: "sum(amount)", descending: true },
      { column: "month(ordered_on)", descending: true },
      { column: "region", descending: false },
    ]);
  });

  it("makes filters and where one row condition, and having one over the answer's fields", () => {
    const query = parseAggregateQuery(
      {
        groupBy: "region",
        metrics: "sum(amount)",
        filters: { region: "EMEA", customer: null },
        where: { amount: { gt: 10 } },
        having: { "sum(amount)": { gte: 100 } },
      },
      COLUMNS,
    );
    expect(query.where).toEqual({
      kind: "all",
      of: [
        {
          kind: "all",
          of: [
            { kind: "test", column: "region", op: "eq", operand: "EMEA" },
            { kind: "test", column: "customer", op: "eq", operand: null },
          ],
        },
        { kind: "test", column: "amount", op: "gt", operand: 10 },
      ],
    });
    expect(query.having).toEqual({ kind: "test", column: "sum(amount)", op: "gte", operand: 100 });
  });

  it("takes the stamps of an input table when the caller names them", () => {
    const table = new Set(["status", "_id", "_createdAt", "_updatedAt"]);
    const query = parseAggregateQuery({ groupBy: "day(_createdAt)", metrics: "max(_updatedAt)" }, table);
    expect(query.groupBy[0]).toEqual({ name: "day(_createdAt)", column: "_createdAt", bucket: "day" });
  });

  it("a column whose name looks like a call is a column when no bucket of that name exists", () => {
    const columns = new Set(["f(x)", "x"]);
    expect(parseAggregateQuery({ groupBy: "f(x)" }, columns).groupBy).toEqual([
      { name: "f(x)", column: "f(x)", bucket: null },
    ]);
  });
});

describe("refusals: 400 invalid_parameter naming the parameter and the part", () => {
  it.each<[string, AggregateParams, string, string, Record<string, unknown>?]>([
    [
      "an unknown metric function",
      { metrics: "count,sum(amount),median(amount)" },
      "metrics",
      'metrics[2]: unknown function "median"',
    ],
    ["a bare name as a metric", { metrics: "amount" }, "metrics", 'metrics[0]: "amount" is not a metric'],
    [
      "an unknown column in a metric",
      { metrics: "sum(amout)" },
      "metrics",
      'metrics[0]: unknown column "amout"',
      { unknownColumns: ["amout"] },
    ],
    [
      "an empty metric",
      { metrics: "count,,sum(amount)" },
      "metrics",
      "metrics[1]: must be count or a function of a column",
    ],
    ["an empty call", { metrics: "sum()" }, "metrics", "metrics[0]: must be count or a function of a column"],
    ["no metric at all", { metrics: "" }, "metrics", "metrics[0]: must be count"],
    ["seventeen metrics", { metrics: Array(17).fill("count").join(",") }, "metrics", "metrics: at most 16 metrics"],
    [
      "a repeated metric",
      { metrics: "count,sum(amount),sum( amount )" },
      "metrics",
      'metrics[2]: "sum(amount)" is named twice',
    ],
    [
      "an unknown bucket",
      { groupBy: "minute(ordered_on)" },
      "groupBy",
      'groupBy[0]: unknown bucket "minute"; one of hour, day, week, month, quarter, year',
    ],
    [
      "an unknown column to group by",
      { groupBy: "region,regio" },
      "groupBy",
      'groupBy[1]: unknown column "regio"',
      { unknownColumns: ["regio"] },
    ],
    [
      "an unknown column in a bucket",
      { groupBy: "month(shipped_on)" },
      "groupBy",
      'groupBy[0]: unknown column "shipped_on"',
      { unknownColumns: ["shipped_on"] },
    ],
    ["a trailing comma", { groupBy: "region," }, "groupBy", "groupBy[1]: must be a column or a time bucket"],
    ["five keys", { groupBy: "region,amount,customer,ordered_on,order date" }, "groupBy", "groupBy: at most 4 keys"],
    ["a repeated key", { groupBy: "region, region" }, "groupBy", 'groupBy[1]: "region" is named twice'],
    [
      "a sort field the answer lacks",
      { groupBy: "region", sort: "-sum(amount)" },
      "sort",
      "sort[0]: the answer has no field sum(amount)",
      { unknownFields: ["sum(amount)"] },
    ],
    [
      "a column that is not a field",
      { groupBy: "region", sort: "amount" },
      "sort",
      "sort[0]: the answer has no field amount",
    ],
    ["a field sorted twice", { groupBy: "region", sort: "region,-region" }, "sort", "sort[1]: region is named twice"],
    [
      "nine sort fields",
      { groupBy: "region", sort: Array(9).fill("region").join(",") },
      "sort",
      "sort: at most 8 fields",
    ],
    ["an empty sort field", { groupBy: "region", sort: "-" }, "sort", "sort[0]: must be a field of the answer"],
    [
      "a having field the answer lacks",
      { groupBy: "region", having: { "sum(amount)": { gt: 1 } } },
      "having",
      'having["sum(amount)"]: the answer has no field sum(amount)',
      { unknownFields: ["sum(amount)"] },
    ],
    [
      "a bad having operator",
      { groupBy: "region", having: { count: { over: 1 } } },
      "having",
      "having.count.over: unknown operator over",
    ],
    ["a bare value in having", { having: { count: 5 } }, "having", "having.count: must be an operator object"],
    ["a bad where", { where: { amount: { gt: [1] } } }, "where", "where.amount.gt: must be a number or a string"],
    [
      "an unknown column in where",
      { where: { amont: { gt: 1 } } },
      "where",
      "where.amont: unknown column amont",
      { unknownColumns: ["amont"] },
    ],
    [
      "an unknown column in filters",
      { filters: { regoin: "EMEA" } },
      "filters",
      "unknown column regoin in filters",
      { unknownColumns: ["regoin"] },
    ],
    ["too many groups", { maxRows: 10_001 }, "maxRows", "maxRows: must be an integer from 0 to 10000"],
    ["a negative offset", { offset: -1 }, "offset", "offset: must be an integer from 0"],
  ])("%s", (_, params, parameter, message, details = {}) => {
    const refused = refusal(params);
    expect(refused).toMatchObject({ status: 400, code: "invalid_parameter", details: { parameter, ...details } });
    expect(refused.message).toContain(message);
  });

  it("refuses a key and a metric of one name", () => {
    expect(refusal({ groupBy: "count" }, new Set(["count"]))).toMatchObject({
      message: 'metrics[0]: "count" is named twice; each field of the answer is named once',
      details: { parameter: "metrics" },
    });
  });

  it("refuses long hostile lists in linear time (no backtracking)", () => {
    const hostile = [
      "a" + " ".repeat(100_000) + "(" + " ".repeat(100_000),
      "sum(" + "(".repeat(200_000),
      " ".repeat(200_000) + "(",
    ];
    for (const text of hostile) {
      for (const parameter of ["groupBy", "metrics", "sort"] as const) {
        expect(refusal({ groupBy: "region", [parameter]: text })).toMatchObject({
          status: 400,
          details: { parameter },
        });
      }
    }
  });

  it("names every unknown column of a list at once", () => {
    expect(refusal({ metrics: "sum(a),min(b),max(a)" }).details).toEqual({
      parameter: "metrics",
      unknownColumns: ["a", "b"],
    });
  });
});
