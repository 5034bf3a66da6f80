import { createMemoryStorage } from "../../src/memory/storage.js";
import { runStorageConformance } from "../../src/testing/index.js";

runStorageConformance("memory", async () => createMemoryStorage());
