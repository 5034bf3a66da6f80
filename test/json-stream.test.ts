import { describe, expect, it } from "vitest";
import { joinedTexts, jsonRowsBody } from "../src/http/json-stream.js";

async function* from<T>(items: T[]): AsyncGenerator<T> {
  yield* items;
}

async function text(body: string | AsyncIterable<string>): Promise<string> {
  if (typeof body === "string") return body;
  let out = "";
  for await (const chunk of body) out += chunk;
  return out;
}

describe("jsonRowsBody over batches of rows' JSON texts", () => {
  it("joins batches with commas and skips empty ones, small (one string) and large (streamed past 64 KB)", async () => {
    const small = await jsonRowsBody("[", from([[], ['{"a":1}', '{"a":2}'], [], ['{"a":3}'], []]), "]", joinedTexts);
    expect(small).toBe('[{"a":1},{"a":2},{"a":3}]');
    expect(JSON.parse(await text(await jsonRowsBody("[", from([[], []] as string[][]), "]", joinedTexts)))).toEqual([]);

    const row = JSON.stringify({ pad: "x".repeat(1000) });
    const batches = Array.from({ length: 200 }, (_, i) => (i % 3 === 0 ? [] : [row, row]));
    const large = await jsonRowsBody('{"data":[', from(batches), () => "]}", joinedTexts);
    expect(typeof large).not.toBe("string");
    const parsed = JSON.parse(await text(large)) as { data: unknown[] };
    expect(parsed.data).toHaveLength(batches.flat().length);
  });
});
