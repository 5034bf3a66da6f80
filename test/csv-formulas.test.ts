import { describe, expect, it } from "vitest";
import { createAdmin } from "../src/admin/index.js";
import { setup } from "./support/api.js";
import { TOKENS } from "./support/fixture.js";

/** Text cells a spreadsheet would run, and their look-alikes it would not. */
const CELLS = ['=HYPERLINK("x")', "+1+1", "@SUM(A1)", "\t=1", "\r=1", "-3", "+42.5", "-", "plain", "a=b", ""];

async function world(options: { csvEscapeFormulas?: boolean } = {}) {
  const ctx = await setup(options);
  const admin = createAdmin(ctx.api);
  await admin.putDataset("ds_cells", {
    teamId: "team_ops",
    name: "Cells",
    type: "upload",
    connectionId: null,
    source: null,
  });
  const rows = CELLS.map((text, i) => ({ n: i, text, "=cmd": i === 0 ? "=1+2" : null }));
  await admin.writeDatasetRows("ds_cells", "replace", [...rows, { n: -3, text: null, "=cmd": -4.5 }]);
  const download = (format: string) =>
    ctx.call("GET", `/api/v1/datasets/ds_cells/rows?format=${format}&teamId=team_ops`, { token: TOKENS.sessionAda });
  return { ...ctx, admin, download };
}

describe("CSV exports are safe to open", () => {
  it("writes a text cell starting with =, +, -, @, a tab or a carriage return with a leading ' unless it is a plain number", async () => {
    const { download } = await world();
    const csv = await download("csv");
    expect(csv.status).toBe(200);
    expect(csv.headers.get("content-type")).toBe("text/csv; charset=utf-8");
    const lines = csv.text.split("\r\n");
    // The header is text too: a column named =cmd is not run either.
    expect(lines[0]).toBe("n,text,'=cmd");
    expect(lines.slice(1, -1)).toEqual([
      `0,"'=HYPERLINK(""x"")",'=1+2`,
      "1,'+1+1,",
      "2,'@SUM(A1),",
      "3,'\t=1,",
      `4,"'\r=1",`,
      "5,-3,",
      "6,+42.5,",
      "7,'-,",
      "8,plain,",
      "9,a=b,",
      `10,"",`,
      // Numbers are numbers: -3 and -4.5 are written as their JSON text, never prefixed.
      "-3,,-4.5",
    ]);
    expect(lines.at(-1)).toBe("");
  });

  it("leaves JSON and NDJSON answers exactly as stored", async () => {
    const { call, download } = await world();
    const ndjson = await download("ndjson");
    const texts = ndjson.text
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line).text);
    expect(texts).toEqual([...CELLS, null]);
    expect(ndjson.text).toContain('"text":"=HYPERLINK(\\"x\\")"');
    expect(ndjson.text).toContain('"text":"\\t=1"');
    const page = await call("GET", "/api/v1/datasets/ds_cells/rows?teamId=team_ops&maxRows=100", {
      token: TOKENS.sessionAda,
    });
    expect(page.json.data.map((row: { text: unknown }) => row.text)).toEqual([...CELLS, null]);
    expect(page.json.data[0]["=cmd"]).toBe("=1+2");
  });

  it("writes the raw text when the host sets csvEscapeFormulas: false", async () => {
    const { download } = await world({ csvEscapeFormulas: false });
    const lines = (await download("csv")).text.split("\r\n");
    expect(lines[0]).toBe("n,text,=cmd");
    expect(lines[1]).toBe(`0,"=HYPERLINK(""x"")",=1+2`);
    expect(lines[2]).toBe("1,+1+1,");
    expect(lines[4]).toBe("3,\t=1,");
    expect(lines[5]).toBe(`4,"\r=1",`);
  });

  it("defuses an input table's export and an unsigned webhook's tab-led formula alike", async () => {
    const { api, admin, call } = await world();
    expect(
      (
        await call("POST", "/api/v1/tables/tbl_targets/rows", {
          token: TOKENS.sync,
          body: { region: "@SUM(A1)", target: -5 },
        })
      ).status,
    ).toBe(201);
    const table = await call("GET", "/api/v1/tables/tbl_targets/rows?format=csv", { token: TOKENS.sync });
    const lines = table.text.split("\r\n");
    expect(lines[0]).toBe("_id,region,target,_createdAt,_updatedAt");
    expect(lines.filter((line) => line.includes("SUM")).map((line) => line.split(",").slice(1, 3))).toEqual([
      ["'@SUM(A1)", "-5"],
    ]);

    const hook = await admin.putConnection("conn_cells_hook", {
      teamId: "team_ops",
      name: "Cells hook",
      type: "webhook",
      config: {},
    });
    const endpoint = String(hook.value.config.endpointId);
    const delivered = await api.fetch(
      new Request(`http://dataport.test/api/webhooks/${endpoint}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: '{"note":"\\t=cmd|\' /C calc\'!A0"}',
      }),
    );
    expect(delivered.status).toBe(200);
    const csv = await call("GET", "/api/v1/datasets/ds_conn_cells_hook/rows?format=csv&columns=note&teamId=team_ops", {
      token: TOKENS.sessionAda,
    });
    expect(csv.text.split("\r\n")[1]).toBe("'\t=cmd|' /C calc'!A0");
  });
});
