import type { z } from "zod";
import type { AdminContext, AuthedContext, HandlerContext } from "./context.js";
import type { Scope } from "./domain/model.js";
import type { Reply } from "./http/reply.js";
import type { HeaderReader } from "./http/types.js";

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
  /** The raw bytes and content type, for handlers that must see the exact body (webhook signatures). */
  | { kind: "raw" }
  /** Any JSON value (an array of items), parsed. */
  | { kind: "json" }
  /** The body as it arrives (`StreamBody`), bounded by `maxUploadBytes`: bulk uploads that must not be held whole. */
  | { kind: "stream" };

export interface StreamBody {
  chunks: AsyncIterable<Uint8Array>;
  contentType: string | null;
}

export interface RawBody {
  bytes: Uint8Array;
  contentType: string | null;
}

interface RouteBase<Query> {
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
  /** Response body schemas by status, for the OpenAPI document. */
  responses?: Record<number, z.ZodType>;
  /** Media type of the success body when it is not JSON (the metrics exposition); documented as text. */
  produces?: string;
  /** Media types the 200 body may also take besides JSON (row downloads, chosen by `format` or `Accept`); documented as text. */
  alsoProduces?: readonly string[];
  /** Whether this call is written to the API usage log (default true). */
  logged?: boolean;
}

export interface AuthedRoute<Query = unknown, Body = unknown> extends RouteBase<Query> {
  auth: "bearer";
  /** The scope an API key needs; null for none. */
  scope: Scope | null;
  handle(input: RouteInput<Query, Body>, ctx: AuthedContext): HandlerResult;
}

export interface PublicRoute<Query = unknown, Body = unknown> extends RouteBase<Query> {
  auth: "none";
  handle(input: RouteInput<Query, Body>, ctx: HandlerContext): HandlerResult;
}

/** A route of the admin API (`/api/admin/v1`): the admin token only, mounted only when one is configured. */
export interface AdminRoute<Query = unknown, Body = unknown> extends RouteBase<Query> {
  auth: "admin";
  handle(input: RouteInput<Query, Body>, ctx: AdminContext): HandlerResult;
}

export type RouteDef = AuthedRoute<any, any> | PublicRoute<any, any> | AdminRoute<any, any>;

/**
 * What a handler returns: a plain value (200 JSON) or a Reply, or a promise
 * of either. Handlers are plain functions; the pipeline absorbs both forms.
 */
export type HandlerResult = unknown | Reply;

/** Typed helpers so each route infers its input from its schemas. */
export function authed<Query = Record<string, never>, Body = undefined>(route: AuthedRoute<Query, Body>): AuthedRoute<Query, Body> {
  return route;
}
export function open<Query = Record<string, never>, Body = undefined>(route: PublicRoute<Query, Body>): PublicRoute<Query, Body> {
  return route;
}
export function admin<Query = Record<string, never>, Body = undefined>(route: AdminRoute<Query, Body>): AdminRoute<Query, Body> {
  return route;
}
