import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Reply } from "../src/http/reply.js";
import { admin, authed, type HandlerResult, open } from "../src/routes/route-def.js";
import type { deleteRow } from "../src/handlers/tables.js";

/**
 * A route's `responses[200]` types what its handler may answer: these
 * routes are checked by `tsc --noEmit` (part of `npm test`). Each
 * `@ts-expect-error` marks a handler that answers a shape its route does not
 * declare; if it compiled, the directive itself would be the error.
 */
const thing = z.object({ id: z.string(), count: z.number().int() });
const base = { method: "GET", path: "/things/:id", summary: "t", tag: "T" } as const;

const routes = [
  authed({
    ...base,
    auth: "bearer",
    scope: null,
    responses: { 200: thing },
    handle: ({ params }) => ({ id: params.id!, count: 1 }),
  }),
  authed({
    ...base,
    auth: "bearer",
    scope: null,
    responses: { 200: thing },
    handle: async () => ({ id: "t", count: 2 }),
  }),
  // @ts-expect-error -- a field of the declared answer is missing
  authed({ ...base, auth: "bearer", scope: null, responses: { 200: thing }, handle: () => ({ id: "t" }) }),
  // @ts-expect-error -- a field has another type than the schema's (behind a promise too)
  // prettier-ignore
  authed({ ...base, auth: "bearer", scope: null, responses: { 200: thing }, handle: async () => ({ id: "t", count: "1" }) }),
  // @ts-expect-error -- a plain value is a 200; a route that declares only a 201 answers with a Reply
  open({ ...base, auth: "none", responses: { 201: thing }, handle: () => ({ id: "t", count: 1 }) }),
  open({ ...base, auth: "none", responses: { 201: thing }, handle: () => Reply.json(201, { id: "t", count: 1 }) }),
  // A Reply stays allowed for a streamed or non-JSON answer.
  open({ ...base, auth: "none", responses: { 200: thing }, handle: () => Reply.jsonStream((async function* () {})()) }),
  // @ts-expect-error -- an admin route's answer is checked the same way
  // prettier-ignore
  admin({ ...base, auth: "admin", responses: { 200: z.object({ data: z.array(thing) }) }, handle: async () => ({ data: [{ id: "t" }] }) }),
];

// A shipped handler answers its schema's type: DELETE /tables/{id}/rows/{rowId} answers `{ deleted: true }`.
type DeleteAnswer = Awaited<ReturnType<typeof deleteRow>>;
const deleted: DeleteAnswer = { deleted: true };
// @ts-expect-error -- its schema says `deleted: true`, so false is not an answer of that route
const notDeleted: DeleteAnswer = { deleted: false };

// Without declared responses a handler may answer anything (the type of a route table's members).
const anything: HandlerResult = "anything";

describe("a route's response schema types its handler's result", () => {
  it("runs the handlers that compile and answers what they declare", async () => {
    const ctx = {} as never;
    const input = { params: { id: "t_1" }, query: {}, body: undefined, headers: { get: () => null } };
    expect(await routes[0]!.handle(input as never, ctx)).toEqual({ id: "t_1", count: 1 });
    expect(await routes[1]!.handle(input as never, ctx)).toEqual({ id: "t", count: 2 });
    expect(((await routes[5]!.handle(input as never, ctx)) as Reply).status).toBe(201);
    expect([deleted, notDeleted, anything]).toEqual([{ deleted: true }, { deleted: false }, "anything"]);
  });
});
