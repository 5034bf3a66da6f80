/** Dataport through the Node adapter on the memory store with the demo fixture. */
import { createServer } from "node:http";
import { readFileSync } from "node:fs";
import { built, type Dataport, type MemoryEntry, type NodeAdapter } from "./built.js";

const { createDataApi, parseFixture } = await built<Dataport>("index.js");
const { toNodeHandler } = await built<NodeAdapter>("adapters/node.js");
const { createMemoryStorage } = await built<MemoryEntry>("memory/index.js");

const storage = createMemoryStorage();
await storage.seed(
  parseFixture(JSON.parse(readFileSync(new URL("../../examples/demo/space.json", import.meta.url), "utf8"))),
);
const api = createDataApi({ storage, webhookRatePerSecond: 1e9 });
createServer(toNodeHandler(api)).listen(Number(process.env.PORT), "127.0.0.1", () => console.log("ready"));
