import type * as OpenTelemetry from "@opentelemetry/api";
import { loadPeer } from "./load.js";

export type OpenTelemetryApi = typeof OpenTelemetry;

/**
 * Whether the host registered a tracer provider with `@opentelemetry/api`,
 * asked without loading the package: the API keeps its registrations on
 * `globalThis` under this symbol (one per major version), so a host without
 * OpenTelemetry costs Dataport a property read and loads nothing.
 */
export function tracerProviderRegistered(): boolean {
  const registry = (globalThis as Record<symbol, { trace?: unknown } | undefined>)[Symbol.for("opentelemetry.js.api.1")];
  return registry?.trace !== undefined;
}

/** `@opentelemetry/api`, or an error naming the package when it is not installed. */
export function loadOpenTelemetry(): OpenTelemetryApi {
  return loadPeer<OpenTelemetryApi>("@opentelemetry/api", "dataport (tracing)");
}
