import type * as PromClient from "prom-client";
import { loadPeer } from "./load.js";

/** `prom-client`, loaded when dataport/metrics is evaluated. */
const promClient = loadPeer<typeof PromClient>("prom-client", "dataport/metrics");

export const collectDefaultMetrics = promClient.collectDefaultMetrics;
export const Counter = promClient.Counter;
export const Gauge = promClient.Gauge;
export const Histogram = promClient.Histogram;
export const Registry = promClient.Registry;
export type Counter<T extends string = string> = PromClient.Counter<T>;
export type Gauge<T extends string = string> = PromClient.Gauge<T>;
export type Histogram<T extends string = string> = PromClient.Histogram<T>;
export type Registry = PromClient.Registry;
