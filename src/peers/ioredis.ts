import type * as IORedis from "ioredis";
import { loadPeer } from "./load.js";

/** `ioredis`, loaded when dataport/redis is evaluated. */
const ioredis = loadPeer<typeof IORedis>("ioredis", "dataport/redis");

export const Redis = ioredis.Redis;
export type Redis = IORedis.Redis;
