import { describe, expect, it } from "vitest";
import type { Column, Row } from "../src/domain/model.js";
import { ApiError } from "../src/base/api-error.js";
import { bulkRowFormat, inferColumnsAlongside, parseRowStream } from "../src/http/bulk-rows.js";

const encoder = new TextEncoder();

async function* chunksOf(...parts: Array<string | Uint8Array>): AsyncGenerator<Uint8Array> {
  for (const part of parts) yield typeof part === "string" ? encoder.encode(part) : part;
}

/** The body split into two chunks at byte `at` (and into one byte per chunk when `at` is -1). */
async function* splitAt(bytes: Uint8Array, at: number): AsyncGenerator<Uint8Array> {
  if (at === -1) {
    for (let i = 0; i < bytes.length; i++) yield bytes.subarray(i, i + 1);
    return;
  }
  yield bytes.subarray(0, at);
  yield bytes.subarray(at);
}

async function collect(rows: AsyncIterable<Row>): Promise<Row[]> {
  const out: Row[] = [];
  for await (const row of rows) out.push(row);
  return out;
}

async function rowsOf(
  body: string | Uint8Array,
  contentType: string,
  columns: Column[] | null = null,
): Promise<Array<Record<string, unknown>>> {
  const rows = await collect(parseRowStream(chunksOf(body), contentType, { columns }));
  // Plain copies for toEqual; each row is checked to be null-prototype first.
  return rows.map((row) => {
    expect(Object.getPrototypeOf(Object.getPrototypeOf(row))).toBeNull();
    return { ...row };
  });
}

async function refusalOf(
  body: string | Uint8Array,
  contentType: string,
  columns: Column[] | null = null,
): Promise<{ status: number; code: string; message: string; details: unknown }> {
  try {
    await collect(parseRowStream(chunksOf(body), contentType, { columns }));
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError);
    const e = error as ApiError;
    return { status: e.status, code: e.code, message: e.message, details: e.details };
  }
  throw new Error("expected a refusal");
}

describe("CSV bodies", () => {
  it("reads quoted fields holding commas, line breaks and doubled quotes", async () => {
    const body = 'id,note,city\n1,"line one\nline two","Paris, France"\n2,"she said ""hi""",Oslo\r\n3,"a\r\nb",\n';
    expect(await rowsOf(body, "text/csv")).toEqual([
      { id: 1, note: "line one\nline two", city: "Paris, France" },
      { id: 2, note: 'she said "hi"', city: "Oslo" },
      { id: 3, note: "a\r\nb", city: null },
    ]);
  });

  it("infers numbers and booleans, keeps leading zeros, long integers, padded numbers and dates as text, and reads an empty cell as null", async () => {
    const body = 'a,b,c,d,e,f,g,h\n-12.5,TRUE,007,12345678901234567890,2026-10-01, 12,1e3,""\n';
    expect(await rowsOf(body, "text/csv")).toEqual([
      { a: -12.5, b: true, c: "007", d: "12345678901234567890", e: "2026-10-01", f: " 12", g: 1000, h: null },
    ]);
  });

  it("reads a header without rows as no rows", async () => {
    expect(await rowsOf("a,b\r\n", "text/csv")).toEqual([]);
  });

  it("skips empty lines and a byte-order mark, and reads a last row without a line break", async () => {
    const body = "\uFEFFname,n\n\nx,1\n\n\ny,2";
    expect(await rowsOf(body, "text/csv")).toEqual([
      { name: "x", n: 1 },
      { name: "y", n: 2 },
    ]);
  });

  it("keeps a header named __proto__ or constructor as data, never as a prototype", async () => {
    const rows = await collect(
      parseRowStream(chunksOf('__proto__,constructor,toString\n"{""polluted"":true}",1,x\n'), "text/csv", {
        columns: null,
      }),
    );
    expect(rows).toHaveLength(1);
    const row = rows[0]!;
    expect(Object.keys(row)).toEqual(["__proto__", "constructor", "toString"]);
    expect(Object.getOwnPropertyDescriptor(row, "__proto__")?.value).toBe('{"polluted":true}');
    expect(row.constructor).toBe(1);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("refuses a ragged row naming its line (4)", async () => {
    const refusal = await refusalOf("a,b,c\n1,2,3\n4,5,6\n7,8\n9,10,11\n", "text/csv");
    expect(refusal).toEqual({
      status: 422,
      code: "validation_failed",
      message: "line 4: the row has 2 fields; the header has 3 fields",
      details: { line: 4 },
    });
  });

  it("names the line where a ragged row starts, counting quoted line breaks, CRLF and skipped empty lines", async () => {
    const body = 'a,b\r\n"x\r\ny",1\r\n\r\n2,3,4\r\n';
    expect(await refusalOf(body, "text/csv")).toMatchObject({
      status: 422,
      details: { line: 5 },
      message: "line 5: the row has 3 fields; the header has 2 fields",
    });
  });

  it("refuses malformed quoting naming the line", async () => {
    expect(await refusalOf('a,b\n1,2\n3,"4"x\n', "text/csv")).toMatchObject({ status: 422, details: { line: 3 } });
    expect(await refusalOf('a,b\n1,2\n3,4"5\n', "text/csv")).toMatchObject({ status: 422, details: { line: 3 } });
    const open = await refusalOf('a,b\n1,2\n3,"4\n5,6\n', "text/csv");
    expect(open).toEqual({
      status: 422,
      code: "validation_failed",
      message: "line 3: a quoted field is not closed (the body ends inside quotes)",
      details: { line: 3 },
    });
  });

  it("refuses an empty body, an empty or repeated header name, and more than 1000 columns", async () => {
    expect(await refusalOf("", "text/csv")).toMatchObject({ status: 422, details: { line: 1 } });
    expect(await refusalOf("a,,c\n1,2,3\n", "text/csv")).toMatchObject({
      message: "line 1: column 2 of the header has no name",
    });
    expect(await refusalOf("\na,b,a\n1,2,3\n", "text/csv")).toMatchObject({ details: { line: 2, column: "a" } });
    const wide = Array.from({ length: 1001 }, (_, i) => `c${i}`).join(",");
    expect(await refusalOf(`${wide}\n`, "text/csv")).toMatchObject({ status: 422, details: { line: 1 } });
  });

  it("refuses a field over 1 MiB naming its line and column", async () => {
    const big = "x".repeat(1024 * 1024 + 1);
    expect(await refusalOf(`a,b\n1,2\n3,${big}\n`, "text/csv")).toMatchObject({
      status: 422,
      details: { line: 3, column: "b" },
    });
    expect(await rowsOf(`a\n${"é".repeat(512 * 1024)}\n`, "text/csv")).toHaveLength(1); // exactly 1 MiB of UTF-8
    // Counted in UTF-8 bytes, not characters: 524,289 characters are 1,048,578 bytes.
    expect(await refusalOf(`a\n${"é".repeat(512 * 1024 + 1)}\n`, "text/csv")).toMatchObject({
      details: { line: 2, column: "a" },
    });
  });

  it("refuses bytes that are not UTF-8, naming their line", async () => {
    const body = new Uint8Array([...encoder.encode("a,b\n1,2\n3,"), 0xff, ...encoder.encode("x\n")]);
    expect(await refusalOf(body, "text/csv")).toMatchObject({
      status: 422,
      details: { line: 3 },
      message: "line 3: the body is not valid UTF-8",
    });
  });
});

describe("CSV with declared columns", () => {
  const columns: Column[] = [
    { name: "id", type: "string" },
    { name: "amount", type: "number" },
    { name: "paid", type: "boolean" },
    { name: "day", type: "date" },
    { name: "at", type: "datetime" },
    { name: "meta", type: "json" },
    { name: "free", type: null },
  ];

  it("converts each cell to its column's type", async () => {
    const body =
      'id,amount,paid,day,at,meta,free\n007,+1.50,False,2026-02-28,2026-02-28T10:00:00Z,"{""k"":[1,2]}",42\n8,,,,2026-03-01,,x\n';
    expect(await rowsOf(body, "text/csv", columns)).toEqual([
      {
        id: "007",
        amount: 1.5,
        paid: false,
        day: "2026-02-28",
        at: "2026-02-28T10:00:00Z",
        meta: { k: [1, 2] },
        free: 42,
      },
      { id: "8", amount: null, paid: null, day: null, at: "2026-03-01", meta: null, free: "x" },
    ]);
  });

  it("refuses a cell that does not convert, naming line and column", async () => {
    const header = "id,amount,paid,day\n";
    expect(await refusalOf(`${header}1,2,true,2026-01-01\n2,12abc,true,2026-01-01\n`, "text/csv", columns)).toEqual({
      status: 422,
      code: "validation_failed",
      message: 'line 3: column "amount" expects a number',
      details: { line: 3, column: "amount" },
    });
    expect(await refusalOf(`${header}1,2,yes,2026-01-01\n`, "text/csv", columns)).toMatchObject({
      details: { line: 2, column: "paid" },
    });
    expect(await refusalOf(`${header}1,2,true,2026-02-30\n`, "text/csv", columns)).toMatchObject({
      details: { line: 2, column: "day" },
    });
    expect(await refusalOf("meta\n{nope\n", "text/csv", columns)).toMatchObject({
      details: { line: 2, column: "meta" },
    });
  });

  it("refuses a header naming a column the dataset does not declare", async () => {
    expect(await refusalOf("id,colour\n1,red\n", "text/csv", columns)).toMatchObject({
      status: 422,
      details: { line: 1, column: "colour" },
      message: expect.stringContaining('column "colour" is not declared'),
    });
  });

  it("infers types when the declaration is empty", async () => {
    expect(await rowsOf("a\n1\n", "text/csv", [])).toEqual([{ a: 1 }]);
  });
});

describe("JSON array bodies", () => {
  it("reads an array of three objects, flattening nested objects and keeping arrays as JSON text", async () => {
    const body =
      '[{"id":1,"user":{"name":"Ann","tags":["a","b"]}},\n {"id":2,"user":{"name":"Bob"},"ok":true},\n {"id":3,"empty":{},"n":null}]';
    expect(await rowsOf(body, "application/json")).toEqual([
      { id: 1, "user.name": "Ann", "user.tags": '["a","b"]' },
      { id: 2, "user.name": "Bob", ok: true },
      { id: 3, empty: "{}", n: null },
    ]);
  });

  it("reads an empty array as no rows, and strings holding brackets, quotes and escapes", async () => {
    expect(await rowsOf(" [ ] ", "application/json")).toEqual([]);
    expect(await rowsOf('[{"s":"}]{[\\"\\\\"}]', "application/json; charset=utf-8")).toEqual([{ s: '}]{["\\' }]);
  });

  it("keeps a __proto__ key as data", async () => {
    const rows = await collect(
      parseRowStream(chunksOf('[{"__proto__":{"polluted":true},"a":1}]'), "application/json", { columns: null }),
    );
    expect(Object.keys(rows[0]!)).toEqual(["__proto__.polluted", "a"]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("refuses what is not an array of objects, naming the line", async () => {
    expect(await refusalOf('[{"a":1},\n2]', "application/json")).toMatchObject({
      status: 422,
      details: { line: 2 },
      message: 'line 2: each element of the array must be a JSON object, found "2"',
    });
    expect(await refusalOf('{"a":1}', "application/json")).toMatchObject({ status: 422, details: { line: 1 } });
    expect(await refusalOf('[{"a":1},]', "application/json")).toMatchObject({ status: 422, details: { line: 1 } });
    expect(await refusalOf('[{"a":1}]\n\n[', "application/json")).toMatchObject({
      message: "line 3: text follows the end of the JSON array",
    });
    expect(await refusalOf('[{"a":1},\n{"b":2}', "application/json")).toMatchObject({ details: { line: 2 } });
    expect(await refusalOf("", "application/json")).toMatchObject({ status: 422, details: { line: 1 } });
  });

  it("names the line where an object with a syntax error starts", async () => {
    expect(await refusalOf('[{"a":1},\n{"b":2,\n"c":,\n"d":3}]', "application/json")).toMatchObject({
      status: 422,
      code: "validation_failed",
      details: { line: 2 },
    });
  });

  it("refuses nesting deeper than 64 levels, and accepts 64", async () => {
    const nested = (levels: number) => `${'{"a":'.repeat(levels - 1)}{}${"}".repeat(levels - 1)}`;
    expect(await rowsOf(`[${nested(64)}]`, "application/json")).toHaveLength(1);
    expect(await refusalOf(`[\n${nested(65).replace("{}", "\n{}")}]`, "application/json")).toMatchObject({
      status: 422,
      details: { line: 2 },
      message: "line 2: the row is nested deeper than 64 levels",
    });
  });

  it("refuses a row of more than 1000 columns, and a string over 1 MiB", async () => {
    const wide = Object.fromEntries(Array.from({ length: 1001 }, (_, i) => [`c${i}`, i]));
    expect(await refusalOf(JSON.stringify([{ a: 1 }, wide]), "application/json")).toMatchObject({
      status: 422,
      details: { line: 1 },
    });
    expect(await refusalOf(`[{"a":1},\n{"big":"${"x".repeat(1024 * 1024 + 1)}"}]`, "application/json")).toMatchObject({
      details: { line: 2, column: "big" },
    });
  });

  it("refuses a body that is not UTF-8, naming the line", async () => {
    const body = new Uint8Array([...encoder.encode('[{"a":1},\n{"a":"'), 0xc3, 0x28, ...encoder.encode('"}]')]);
    expect(await refusalOf(body, "application/json")).toMatchObject({ status: 422, details: { line: 2 } });
  });
});

describe("NDJSON bodies", () => {
  it("reads one object per line and skips blank lines", async () => {
    const body = '{"a":1}\n\n  \r\n{"a":2,"b":{"c":"x"}}\r\n{"a":3}';
    expect(await rowsOf(body, "application/x-ndjson")).toEqual([{ a: 1 }, { a: 2, "b.c": "x" }, { a: 3 }]);
    expect(await rowsOf("", "application/x-ndjson")).toEqual([]);
  });

  it("refuses a bad line naming its number", async () => {
    expect(await refusalOf('{"a":1}\n{"a":2}\n\n{"a":3,}\n{"a":4}\n', "application/x-ndjson")).toEqual({
      status: 422,
      code: "validation_failed",
      message: expect.stringMatching(/^line 4: not valid JSON/),
      details: { line: 4 },
    });
    expect(await refusalOf('{"a":1}\n[1,2]\n', "application/x-ndjson")).toMatchObject({ details: { line: 2 } });
    expect(await refusalOf('{"a":1}\n{"a":2} {"a":3}\n', "application/x-ndjson")).toMatchObject({
      details: { line: 2 },
    });
    expect(await refusalOf('{"a":1}\n{"a":\n2}\n', "application/x-ndjson")).toMatchObject({ details: { line: 2 } });
    expect(await refusalOf('{"a":1}\n{"a":2', "application/x-ndjson")).toMatchObject({ details: { line: 2 } });
  });
});

describe("JSON with declared columns", () => {
  const columns: Column[] = [
    { name: "id", type: "number" },
    { name: "user.name", type: "string" },
    { name: "meta", type: "json" },
  ];

  it("keeps a value under a json column whole and flattens the rest", async () => {
    expect(
      await rowsOf('{"id":1,"user":{"name":"Ann"},"meta":{"k":[1,{"x":2}]}}\n', "application/x-ndjson", columns),
    ).toEqual([{ id: 1, "user.name": "Ann", meta: { k: [1, { x: 2 }] } }]);
  });

  it("refuses a value of another type and an undeclared column, naming the line", async () => {
    expect(await refusalOf('{"id":1}\n{"id":"2"}\n', "application/x-ndjson", columns)).toEqual({
      status: 422,
      code: "validation_failed",
      message: 'line 2: column "id" expects a number',
      details: { line: 2, column: "id" },
    });
    expect(await refusalOf('[{"id":1},\n\n{"user":{"email":"a@b"}}]', "application/json", columns)).toMatchObject({
      details: { line: 3, column: "user.email" },
    });
  });
});

describe("chunk boundaries", () => {
  const cases: Array<{ contentType: string; body: string; rows?: Array<Record<string, unknown>>; line?: number }> = [
    {
      contentType: "text/csv",
      body: '\uFEFFid,note\r\n1,"a ""q"", b\r\nc"\r\n2,é€😀\r\n\r\n3,""\r\n',
      rows: [
        { id: 1, note: 'a "q", b\r\nc' },
        { id: 2, note: "é€😀" },
        { id: 3, note: null },
      ],
    },
    { contentType: "text/csv", body: 'a,b\n"x\ny",1\n\n2,3,4\n', line: 5 },
    {
      contentType: "application/json",
      body: '[{"a":"}\\"{","b":{"c":"é😀"}},\n {"a":2}]',
      rows: [{ a: '}"{', "b.c": "é😀" }, { a: 2 }],
    },
    { contentType: "application/json", body: '[{"a":1},\n{"a":2},\n{"a":}]', line: 3 },
    {
      contentType: "application/x-ndjson",
      body: '{"a":"😀"}\r\n\n{"a":[1,{"b":2}]}\n',
      rows: [{ a: "😀" }, { a: '[1,{"b":2}]' }],
    },
    { contentType: "application/x-ndjson", body: '{"a":1}\n\n{"a":x}\n', line: 3 },
  ];

  it("gives the same rows, or the same refused line, however the body is split", async () => {
    for (const { contentType, body, rows, line } of cases) {
      const bytes = encoder.encode(body);
      for (let at = -1; at <= bytes.length; at++) {
        const parsed = parseRowStream(splitAt(bytes, at), contentType, { columns: null });
        if (rows) {
          const got = (await collect(parsed)).map((row) => ({ ...row }));
          expect(got, `${contentType} split at ${at}`).toEqual(rows);
        } else {
          const error = await collect(parsed).then(
            () => null,
            (e: unknown) => e,
          );
          expect(error, `${contentType} split at ${at}`).toBeInstanceOf(ApiError);
          expect((error as ApiError).details, `${contentType} split at ${at}`).toEqual({ line });
        }
      }
    }
  });
});

describe("media types and streaming", () => {
  it("answers 415 at once for another media type or charset", () => {
    expect(() => parseRowStream(chunksOf("x"), "text/plain", { columns: null })).toThrow(
      expect.objectContaining({ status: 415, code: "unsupported_media_type" }),
    );
    expect(() => parseRowStream(chunksOf("x"), null, { columns: null })).toThrow(
      expect.objectContaining({ status: 415 }),
    );
    expect(() => bulkRowFormat("text/csv; charset=latin1")).toThrow(expect.objectContaining({ status: 415 }));
    expect(bulkRowFormat("Text/CSV; charset=UTF-8")).toBe("csv");
    expect(bulkRowFormat("application/ndjson")).toBe("ndjson");
  });

  it("reads the body only as rows are asked for, and closes it when the reader stops", async () => {
    let pulled = 0;
    let closed = false;
    async function* body(): AsyncGenerator<Uint8Array> {
      try {
        yield encoder.encode("n\n");
        for (let i = 0; i < 1000; i++) {
          pulled++;
          yield encoder.encode(`${i}\n`);
        }
      } finally {
        closed = true;
      }
    }
    const seen: unknown[] = [];
    for await (const row of parseRowStream(body(), "text/csv", { columns: null })) {
      seen.push(row.n);
      if (seen.length === 3) break;
    }
    expect(seen).toEqual([0, 1, 2]);
    expect(pulled).toBeLessThan(10);
    expect(closed).toBe(true);
  });
});

describe("inferColumnsAlongside", () => {
  it("widens types over the rows read, after the base columns, in first-seen order", async () => {
    const tracked = inferColumnsAlongside(
      parseRowStream(chunksOf("a,b,c\n1,2026-01-01,x\n2.5,2026-01-01T10:00:00Z,\n,x,true\n"), "text/csv", {
        columns: null,
      }),
      [
        { name: "z", type: "number" },
        { name: "c", type: null },
      ],
    );
    expect(tracked.columns()).toEqual([
      { name: "z", type: "number" },
      { name: "c", type: null },
    ]);
    expect(await collect(tracked.rows)).toHaveLength(3);
    expect(tracked.columns()).toEqual([
      { name: "z", type: "number" },
      { name: "c", type: "string" },
      { name: "a", type: "number" },
      { name: "b", type: "string" },
    ]);
  });

  it("keeps declared types when converted values fit them", async () => {
    const columns: Column[] = [
      { name: "at", type: "datetime" },
      { name: "meta", type: "json" },
      { name: "free", type: null },
    ];
    const tracked = inferColumnsAlongside(
      parseRowStream(chunksOf('at,meta,free\n2026-01-01,"[1]",\n2026-01-01T00:00:00Z,"""s""",2\n'), "text/csv", {
        columns,
      }),
      columns,
    );
    await collect(tracked.rows);
    expect(tracked.columns()).toEqual([
      { name: "at", type: "datetime" },
      { name: "meta", type: "json" },
      { name: "free", type: "number" },
    ]);
  });
});

describe("hostile text in uploads", () => {
  const collect = async (body: string, type: string) => {
    const rows: unknown[] = [];
    for await (const row of parseRowStream(
      (async function* () {
        yield new TextEncoder().encode(body);
      })(),
      type,
      { columns: null },
    ))
      rows.push(row);
    return rows;
  };
  it("refuses NUL, unpaired surrogates, non-finite numbers and deep nesting with 422 naming the line", async () => {
    await expect(collect('{"a":1}\n{"a":"x\\u0000y"}\n', "application/x-ndjson")).rejects.toMatchObject({
      status: 422,
      details: { line: 2 },
    });
    await expect(collect('[{"a":"\\ud800"}]', "application/json")).rejects.toMatchObject({
      status: 422,
      details: { line: 1 },
    });
    await expect(collect('{"a":1e400}\n', "application/x-ndjson")).rejects.toMatchObject({
      status: 422,
      details: { line: 1 },
    });
    await expect(collect(`{"a":${"[".repeat(100)}${"]".repeat(100)}}\n`, "application/x-ndjson")).rejects.toMatchObject(
      { status: 422 },
    );
    await expect(collect("a,b\n1,x\u0000y\n", "text/csv")).rejects.toMatchObject({
      status: 422,
      details: { line: 2, column: "b" },
    });
    await expect(collect("a,\u0000\n1,2\n", "text/csv")).rejects.toMatchObject({ status: 422, details: { line: 1 } });
    expect(await collect('{"a":"emoji \\ud83d\\ude00"}\n', "application/x-ndjson")).toEqual([
      Object.assign(Object.create(null), { a: "emoji 😀" }),
    ]);
  });
});
