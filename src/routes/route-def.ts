import type { z } from "zod";
import type { Awaitable } from "../base/awaitable.js";
import type { AuthedContext, HandlerContext } from "../context/handler.js";
import type { AdminContext } from "./admin-context.js";
import type { Deprecation } from "./deprecation.js";
import type { Scope } from "../domain/model.js";
import type { Reply } from "../http/reply.js";
import type { HeaderReader } from "../base/headers.js";

export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/** Parsed, typed input of a handler. */
export interface RouteInput<Query, Body> {
  /** Path parameters, percent-decoded. */
  params: Record<string, string>;
  query: Query;
  body: Body;
  headers: HeaderReader;
}

/** How a route takes its body. */
export type BodySpec =
  /** A JSON object (400 invalid_body otherwise), optionally checked by a schema. */
  | { kind: "json-object" }
  /**
   * The raw bytes and content type, for handlers that must see the exact body (webhook signatures).
   * `tooLarge: "handler"`: a body over the limit is no failure of the input stage; the handler gets
   * no bytes and the 413 in `RawBody.tooLarge`, to answer it itself (the webhook receiver logs it).
   */
  | { kind: "raw"; tooLarge?: "handler" }
  /** Any JSON value (an array of items), parsed. */
  | { kind: "json" }
  /** The body as it arrives (`StreamBody`), bounded by `maxUploadBytes`: bulk uploads that must not be held whole. */
  | { kind: "stream" };

interface RouteBase<Query, R extends Responses> {
  method: Method;
  /** itty-router pattern relative to the mount (`/datasets/:id/rows`). */
  path: string;
  summary: string;
  /**
   * The OpenAPI operationId, named for what the call does (`listDatasets`,
   * `createTableRow`): generated clients name their methods after it.
   * Default: one derived from the method and path (`GET /teams/:id/api-keys` → `listTeamApiKeys`).
   */
  operationId?: string;
  /** OpenAPI tag. */
  tag: string;
  /** Query parameters, validated and typed at the edge (400 invalid_parameter on failure). */
  query?: z.ZodType<Query>;
  body?: BodySpec;
  /** The request body as the OpenAPI document describes it; documentation only, the body is not parsed through it. */
  bodySchema?: z.ZodType;
  /**
   * Response body schemas by status: the OpenAPI document, the client's
   * types, and the type of what `handle` may answer (`HandlerResult`).
   */
  responses?: R;
  /** Media type of the success body when it is not JSON (the metrics exposition); documented as text. */
  produces?: string;
  /**
   * Media types the 200 body may also take besides JSON (row downloads, chosen by `format` or `Accept`); documented as
   * text.
   */
  alsoProduces?: readonly string[];
  /** Whether its success answers carry an `ETag` (documented with them; the handler sets it). */
  etag?: boolean;
  /** Whether this call is written to the API usage log (default true). */
  logged?: boolean;
  /**
   * Marks the route deprecated: its answers carry `Deprecation`, `Sunset`
   * and `Link: <…>; rel="deprecation"`, and the OpenAPI document says
   * `deprecated: true`. How a breaking change ships: docs/versioning.md.
   */
  deprecated?: Deprecation;
}

export interface AuthedRoute<Query = unknown, Body = unknown, R extends Responses = Responses> extends RouteBase<
  Query,
  R
> {
  auth: "bearer";
  /** The scope an API key needs; null for none. */
  scope: Scope | null;
  handle(input: RouteInput<Query, Body>, ctx: AuthedContext): HandlerResult<R>;
}

export interface PublicRoute<Query = unknown, Body = unknown, R extends Responses = Responses> extends RouteBase<
  Query,
  R
> {
  auth: "none";
  handle(input: RouteInput<Query, Body>, ctx: HandlerContext): HandlerResult<R>;
}

/** A route of the admin API (`/api/admin/v1`): the admin token only, mounted only when one is configured. */
export interface AdminRoute<Query = unknown, Body = unknown, R extends Responses = Responses> extends RouteBase<
  Query,
  R
> {
  auth: "admin";
  handle(input: RouteInput<Query, Body>, ctx: AdminContext): HandlerResult<R>;
}

export type RouteDef = AuthedRoute<any, any, any> | PublicRoute<any, any, any> | AdminRoute<any, any, any>;

/** Response body schemas by status. */
export type Responses = Record<number, z.ZodType>;

/**
 * What a handler returns: a plain value, answered as 200 JSON, or a Reply
 * (another status, a stream, a body that is not JSON), or a promise of
 * either. Handlers are plain functions; the pipeline absorbs both forms.
 * The plain value is what the route's `responses[200]` schema declares, so
 * a handler, its OpenAPI schema and its client type cannot drift apart: a
 * route whose success is not a 200 answers with a Reply. A route that
 * declares no responses may answer any value.
 */
export type HandlerResult<R extends Responses = Responses> = Awaitable<JsonAnswer<R> | Reply>;

/** The 200 body a route's responses declare (never without one). */
export type JsonAnswer<R extends Responses> = 200 extends keyof R ? z.output<NonNullable<R[200]>> : never;

/** Typed helpers so each route infers its input from its schemas. */
export function authed<Query = Record<string, never>, Body = undefined, R extends Responses = Responses>(
  route: AuthedRoute<Query, Body, R>,
): AuthedRoute<Query, Body, R> {
  return route;
}
export function open<Query = Record<string, never>, Body = undefined, R extends Responses = Responses>(
  route: PublicRoute<Query, Body, R>,
): PublicRoute<Query, Body, R> {
  return route;
}
export function admin<Query = Record<string, never>, Body = undefined, R extends Responses = Responses>(
  route: AdminRoute<Query, Body, R>,
): AdminRoute<Query, Body, R> {
  return route;
}
