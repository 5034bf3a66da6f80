import { join } from "node:path";
import ts from "typescript";
import { describe, expect, expectTypeOf, it } from "vitest";
import type { z } from "zod";
import type * as client from "../../src/client/index.js";
import type { ErrorCode } from "../../src/base/api-error.js";
import type * as audit from "../../src/schemas/audit.js";
import type * as changes from "../../src/schemas/changes.js";
import type * as common from "../../src/schemas/common.js";
import type * as connections from "../../src/schemas/connections.js";
import type * as dashboards from "../../src/schemas/dashboards.js";
import type * as datasets from "../../src/schemas/datasets.js";
import type * as identity from "../../src/schemas/identity.js";
import type * as tables from "../../src/schemas/tables.js";
import type * as webhooks from "../../src/schemas/webhooks.js";
import { diagnosticsIn } from "../support/typecheck.js";

/**
 * The client's hand-written types (it carries no schema library) are the
 * server's response schemas, exactly: a change to either side that the other
 * does not follow fails here. `npm test` type-checks this file with the rest;
 * the last test runs the compiler over it so `vitest run` alone catches a drift too.
 */
type Out<T extends z.ZodType> = z.output<T>;

describe("client types equal the response schemas", () => {
  it("resources", () => {
    expectTypeOf<client.Column>().toEqualTypeOf<Out<typeof common.columnSchema>>();
    expectTypeOf<client.Dataset>().toEqualTypeOf<Out<typeof datasets.datasetSchema>>();
    expectTypeOf<client.DatasetDetail>().toEqualTypeOf<Out<typeof datasets.datasetDetailSchema>>();
    expectTypeOf<client.Dashboard>().toEqualTypeOf<Out<typeof dashboards.dashboardSchema>>();
    expectTypeOf<client.TableRow>().toEqualTypeOf<Out<typeof tables.tableRowSchema>>();
    expectTypeOf<client.AuditEvent>().toEqualTypeOf<Out<typeof audit.auditEventSchema>>();
    expectTypeOf<client.OcsfApiActivity>().toEqualTypeOf<Out<typeof audit.ocsfEventSchema>>();
    expectTypeOf<client.Me>().toEqualTypeOf<Out<typeof identity.meSchema>>();
    expectTypeOf<client.FeatureCollection>().toEqualTypeOf<Out<typeof connections.featureCollectionSchema>>();
  });

  it("pages and results", () => {
    expectTypeOf<client.DatasetRowsPage>().toEqualTypeOf<Out<typeof datasets.datasetRowsPageSchema>>();
    expectTypeOf<client.ConnectionQueryRows>().toEqualTypeOf<Out<typeof connections.connectionRowsSchema>>();
    expectTypeOf<client.ConnectionQueryGeoJson>().toEqualTypeOf<Out<typeof connections.connectionGeoJsonSchema>>();
    expectTypeOf<client.ConnectionQueryResult>().toEqualTypeOf<Out<typeof connections.connectionQueryResultSchema>>();
    expectTypeOf<client.DashboardViews>().toEqualTypeOf<Out<typeof dashboards.dashboardViewsSchema>>();
    expectTypeOf<client.SpaceObject>().toEqualTypeOf<Out<typeof dashboards.spaceObjectPageSchema>>();
    expectTypeOf<client.TableRowsPage>().toEqualTypeOf<Out<typeof tables.tableRowsPageSchema>>();
    expectTypeOf<client.AuditPage>().toEqualTypeOf<Out<typeof audit.auditPageSchema>>();
    expectTypeOf<client.ChangesPage>().toEqualTypeOf<Out<typeof changes.changesPageSchema>>();
    expectTypeOf<client.WebhookReceipt>().toEqualTypeOf<Out<typeof webhooks.webhookReceiptSchema>>();
    expectTypeOf<{ datasets: client.Dataset[] }>().toEqualTypeOf<Out<typeof datasets.datasetListSchema>>();
    expectTypeOf<{ dashboards: client.Dashboard[] }>().toEqualTypeOf<Out<typeof dashboards.dashboardListSchema>>();
    expectTypeOf<{ deleted: true }>().toEqualTypeOf<Out<typeof tables.tableRowDeletedSchema>>();
  });

  it("errors", () => {
    expectTypeOf<client.ErrorCode>().toEqualTypeOf<ErrorCode>();
    expectTypeOf<client.ErrorCode>().toEqualTypeOf<Out<typeof common.errorCodeSchema>>();
    expectTypeOf<client.ErrorEnvelope>().toEqualTypeOf<Out<typeof common.errorEnvelopeSchema>>();
    expectTypeOf<client.DataportError["code"]>().toEqualTypeOf<
      ErrorCode | "timeout" | "network_error" | "unexpected_response"
    >();
  });

  it("type-checks (the assertions above are types: the compiler runs them)", () => {
    const root = join(import.meta.dirname, "..", "..");
    const config = ts.readConfigFile(join(root, "tsconfig.json"), ts.sys.readFile);
    const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
    const file = join(import.meta.dirname, "types.test.ts");
    const program = ts.createProgram([file], { ...options, noEmit: true });
    const problems = diagnosticsIn(program, (name) => name === file).map(
      (d) =>
        `${d.file!.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`,
    );
    expect(problems).toEqual([]);
  }, 60_000);
});
