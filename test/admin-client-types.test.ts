import { join } from "node:path";
import ts from "typescript";
import { describe, expect, expectTypeOf, it } from "vitest";
import type { Admin, ChangeOptions } from "../src/admin/index.js";
import type { AdminClient, RowsUpload } from "../src/admin-client/index.js";
import type { RequestOptions } from "../src/client/index.js";
import { diagnosticsIn } from "./support/typecheck.js";

/**
 * Each admin client method takes the arguments of the admin function its
 * route calls and answers what that function answers: a change to the
 * functions' types that the client does not follow fails here. The last
 * argument of a client method adds the call's transport options (signal,
 * timeout, retries, headers) to the function's own options.
 */
type Client = AdminClient;
type Args<F extends (...args: any) => any> = Parameters<F>;
type Result<F extends (...args: any) => any> = Awaited<ReturnType<F>>;
type Change = (ChangeOptions & RequestOptions) | undefined;

describe("admin client methods mirror the admin functions", () => {
  it("identity: businesses, teams, users, memberships, sessions", () => {
    expectTypeOf<Args<Client["businesses"]["put"]>>().toEqualTypeOf<
      [Args<Admin["putBusiness"]>[0], Args<Admin["putBusiness"]>[1], Change?]
    >();
    expectTypeOf<Result<Client["businesses"]["put"]>>().toEqualTypeOf<Result<Admin["putBusiness"]>>();
    expectTypeOf<Result<Client["businesses"]["get"]>>().toEqualTypeOf<Result<Admin["getBusiness"]>>();
    expectTypeOf<Result<Client["businesses"]["list"]>>().toEqualTypeOf<Result<Admin["listBusinesses"]>>();
    expectTypeOf<Result<Client["businesses"]["delete"]>>().toEqualTypeOf<Result<Admin["deleteBusiness"]>>();
    expectTypeOf<Args<Client["businesses"]["list"]>[0]>().toEqualTypeOf<
      (NonNullable<Args<Admin["listBusinesses"]>[0]> & RequestOptions) | undefined
    >();

    expectTypeOf<Args<Client["teams"]["put"]>[1]>().toEqualTypeOf<Args<Admin["putTeam"]>[1]>();
    expectTypeOf<Args<Client["teams"]["put"]>[2]>().toEqualTypeOf<Change>();
    expectTypeOf<Result<Client["teams"]["put"]>>().toEqualTypeOf<Result<Admin["putTeam"]>>();
    expectTypeOf<Result<Client["teams"]["get"]>>().toEqualTypeOf<Result<Admin["getTeam"]>>();
    expectTypeOf<Result<Client["teams"]["list"]>>().toEqualTypeOf<Result<Admin["listTeams"]>>();
    expectTypeOf<Args<Client["teams"]["delete"]>[1]>().toEqualTypeOf<Change>();

    expectTypeOf<Args<Client["users"]["put"]>[1]>().toEqualTypeOf<Args<Admin["putUser"]>[1]>();
    expectTypeOf<Result<Client["users"]["put"]>>().toEqualTypeOf<Result<Admin["putUser"]>>();
    expectTypeOf<Result<Client["users"]["get"]>>().toEqualTypeOf<Result<Admin["getUser"]>>();
    expectTypeOf<Result<Client["users"]["list"]>>().toEqualTypeOf<Result<Admin["listUsers"]>>();

    expectTypeOf<Args<Client["memberships"]["put"]>>().toEqualTypeOf<
      [string, string, Args<Admin["putMembership"]>[2], Change?]
    >();
    expectTypeOf<Result<Client["memberships"]["put"]>>().toEqualTypeOf<Result<Admin["putMembership"]>>();
    expectTypeOf<Result<Client["memberships"]["get"]>>().toEqualTypeOf<Result<Admin["getMembership"]>>();
    expectTypeOf<Result<Client["memberships"]["list"]>>().toEqualTypeOf<Result<Admin["listMemberships"]>>();
    expectTypeOf<Args<Client["memberships"]["delete"]>>().toEqualTypeOf<[string, string, Change?]>();

    expectTypeOf<Args<Client["sessions"]["create"]>[0]>().toEqualTypeOf<Args<Admin["createSession"]>[0]>();
    expectTypeOf<Result<Client["sessions"]["create"]>>().toEqualTypeOf<Result<Admin["createSession"]>>();
    expectTypeOf<Result<Client["sessions"]["get"]>>().toEqualTypeOf<Result<Admin["getSession"]>>();
    expectTypeOf<Result<Client["sessions"]["delete"]>>().toEqualTypeOf<Result<Admin["deleteSession"]>>();
  });

  it("API keys", () => {
    expectTypeOf<Args<Client["apiKeys"]["create"]>[0]>().toEqualTypeOf<Args<Admin["createApiKey"]>[0]>();
    expectTypeOf<Result<Client["apiKeys"]["create"]>>().toEqualTypeOf<Result<Admin["createApiKey"]>>();
    expectTypeOf<Result<Client["apiKeys"]["list"]>>().toEqualTypeOf<Result<Admin["listApiKeys"]>>();
    expectTypeOf<Result<Client["apiKeys"]["get"]>>().toEqualTypeOf<Result<Admin["getApiKey"]>>();
    expectTypeOf<Result<Client["apiKeys"]["revoke"]>>().toEqualTypeOf<Result<Admin["deleteApiKey"]>>();
    expectTypeOf<Args<Client["apiKeys"]["revoke"]>[1]>().toEqualTypeOf<Change>();
  });

  it("connections, datasets and their rows, refresh", () => {
    expectTypeOf<Args<Client["connections"]["put"]>[1]>().toEqualTypeOf<Args<Admin["putConnection"]>[1]>();
    expectTypeOf<Result<Client["connections"]["put"]>>().toEqualTypeOf<Result<Admin["putConnection"]>>();
    expectTypeOf<Result<Client["connections"]["get"]>>().toEqualTypeOf<Result<Admin["getConnection"]>>();
    expectTypeOf<Result<Client["connections"]["list"]>>().toEqualTypeOf<Result<Admin["listConnections"]>>();
    expectTypeOf<Args<Client["connections"]["setSigningSecret"]>[1]>().toEqualTypeOf<
      Args<Admin["setSigningSecret"]>[1]
    >();
    expectTypeOf<Result<Client["connections"]["setSigningSecret"]>>().toEqualTypeOf<
      Result<Admin["setSigningSecret"]>
    >();
    expectTypeOf<Result<Client["connections"]["listDeliveries"]>>().toEqualTypeOf<
      Result<Admin["listWebhookDeliveries"]>
    >();
    expectTypeOf<Args<Client["connections"]["listDeliveries"]>[1]>().toMatchTypeOf<
      Args<Admin["listWebhookDeliveries"]>[1]
    >();
    expectTypeOf<Result<Client["connections"]["getDelivery"]>>().toEqualTypeOf<Result<Admin["getWebhookDelivery"]>>();
    expectTypeOf<Result<Client["connections"]["replayDelivery"]>>().toEqualTypeOf<
      Result<Admin["replayWebhookDelivery"]>
    >();
    expectTypeOf<Args<Client["connections"]["replayDeliveries"]>[1]>().toEqualTypeOf<
      Args<Admin["replayWebhookDeliveries"]>[1]
    >();
    expectTypeOf<Result<Client["connections"]["replayDeliveries"]>>().toEqualTypeOf<
      Result<Admin["replayWebhookDeliveries"]>
    >();

    expectTypeOf<Args<Client["datasets"]["put"]>[1]>().toEqualTypeOf<Args<Admin["putDataset"]>[1]>();
    expectTypeOf<Result<Client["datasets"]["put"]>>().toEqualTypeOf<Result<Admin["putDataset"]>>();
    expectTypeOf<Result<Client["datasets"]["get"]>>().toEqualTypeOf<Result<Admin["getDataset"]>>();
    expectTypeOf<Result<Client["datasets"]["list"]>>().toEqualTypeOf<Result<Admin["listDatasets"]>>();
    // Uploads take what writeDatasetRows takes (rows in hand), or a body already encoded as uploadDatasetRows reads it.
    expectTypeOf<Args<Admin["writeDatasetRows"]>[2]>().toExtend<RowsUpload>();
    expectTypeOf<Args<Client["datasets"]["replaceRows"]>[1]>().toEqualTypeOf<RowsUpload>();
    expectTypeOf<Result<Client["datasets"]["replaceRows"]>>().toEqualTypeOf<Result<Admin["uploadDatasetRows"]>>();
    expectTypeOf<Result<Client["datasets"]["appendRows"]>>().toEqualTypeOf<Result<Admin["writeDatasetRows"]>>();
    expectTypeOf<Args<Client["datasets"]["refresh"]>[1]>().toEqualTypeOf<
      (NonNullable<Args<Admin["refreshDataset"]>[1]> & RequestOptions) | undefined
    >();
    expectTypeOf<Result<Client["datasets"]["refresh"]>>().toEqualTypeOf<Result<Admin["refreshDataset"]>>();
  });

  it("tables, dashboards and their versions", () => {
    expectTypeOf<Args<Client["tables"]["put"]>[1]>().toEqualTypeOf<Args<Admin["putTable"]>[1]>();
    expectTypeOf<Result<Client["tables"]["put"]>>().toEqualTypeOf<Result<Admin["putTable"]>>();
    expectTypeOf<Result<Client["tables"]["get"]>>().toEqualTypeOf<Result<Admin["getTable"]>>();
    expectTypeOf<Result<Client["tables"]["list"]>>().toEqualTypeOf<Result<Admin["listTables"]>>();

    expectTypeOf<Args<Client["dashboards"]["putVersion"]>>().toEqualTypeOf<
      [string, number, Args<Admin["putDashboardVersion"]>[2], Change?]
    >();
    expectTypeOf<Result<Client["dashboards"]["putVersion"]>>().toEqualTypeOf<Result<Admin["putDashboardVersion"]>>();
    expectTypeOf<Result<Client["dashboards"]["get"]>>().toEqualTypeOf<Result<Admin["getDashboard"]>>();
    expectTypeOf<Result<Client["dashboards"]["list"]>>().toEqualTypeOf<Result<Admin["listDashboards"]>>();
    expectTypeOf<Result<Client["dashboards"]["delete"]>>().toEqualTypeOf<Result<Admin["deleteDashboard"]>>();
  });

  it("history batches", () => {
    expectTypeOf<Args<Client["history"]["recordDashboardViews"]>>().toEqualTypeOf<
      [Args<Admin["recordDashboardViews"]>[0], Change?]
    >();
    expectTypeOf<Result<Client["history"]["recordDashboardViews"]>>().toEqualTypeOf<
      Result<Admin["recordDashboardViews"]>
    >();
    expectTypeOf<Args<Client["history"]["recordRefreshRuns"]>[0]>().toEqualTypeOf<
      Args<Admin["recordRefreshRuns"]>[0]
    >();
    expectTypeOf<Result<Client["history"]["recordRefreshRuns"]>>().toEqualTypeOf<Result<Admin["recordRefreshRuns"]>>();
    expectTypeOf<Args<Client["history"]["recordCreditUsage"]>[0]>().toEqualTypeOf<
      Args<Admin["recordCreditUsage"]>[0]
    >();
    expectTypeOf<Result<Client["history"]["recordCreditUsage"]>>().toEqualTypeOf<Result<Admin["recordCreditUsage"]>>();
    expectTypeOf<Args<Client["history"]["recordAuditEvents"]>[0]>().toEqualTypeOf<
      Args<Admin["recordAuditEvents"]>[0]
    >();
    expectTypeOf<Result<Client["history"]["recordAuditEvents"]>>().toEqualTypeOf<Result<Admin["recordAuditEvents"]>>();
  });

  it("type-checks (the assertions above are types: the compiler runs them)", () => {
    const root = join(import.meta.dirname, "..");
    const config = ts.readConfigFile(join(root, "tsconfig.json"), ts.sys.readFile);
    const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
    const file = join(import.meta.dirname, "admin-client-types.test.ts");
    const program = ts.createProgram([file], { ...options, noEmit: true });
    const problems = diagnosticsIn(program, (name) => name === file).map(
      (d) =>
        `${d.file!.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`,
    );
    expect(problems).toEqual([]);
  }, 120_000);
});
