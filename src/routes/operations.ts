import { exposeMetrics } from "../handlers/metrics.js";
import { liveness, readiness } from "../handlers/health.js";
import { open } from "./route-def.js";
import { errorEnvelopeSchema } from "../schemas/common.js";
import { livenessSchema, readinessSchema } from "../schemas/operations.js";

/**
 * What operators and their probes call, mounted under `/api` beside the
 * webhook receiver: no authentication, kept out of the API usage log.
 */
export const operationsRoutes = [
  open({
    method: "GET",
    path: "/health/live",
    operationId: "getLiveness",
    auth: "none",
    tag: "Operations",
    summary: "Liveness: the process answers (touches no dependency)",
    responses: { 200: livenessSchema },
    logged: false,
    handle: async () => liveness(),
  }),
  open({
    method: "GET",
    path: "/health/ready",
    operationId: "getReadiness",
    auth: "none",
    tag: "Operations",
    summary:
      "Readiness: a round trip to the store (and Redis when used), each check bounded; 503 when one fails or the " +
      "API is draining",
    responses: { 200: readinessSchema, 503: readinessSchema },
    logged: false,
    handle: (_input, ctx) => readiness(ctx),
  }),
  open({
    method: "GET",
    path: "/metrics",
    operationId: "getMetrics",
    auth: "none",
    tag: "Operations",
    summary:
      "Prometheus metrics (text exposition format); a bearer token when the server sets one, 404 when metrics are off",
    produces: "text/plain; version=0.0.4",
    responses: { 401: errorEnvelopeSchema, 404: errorEnvelopeSchema },
    logged: false,
    handle: ({ headers }, ctx) => exposeMetrics(ctx, headers),
  }),
];
