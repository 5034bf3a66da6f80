import { createMemoryStorage } from "../../src/memory/memory-storage.js";
import { mountStorage } from "../../src/storage/mount.js";
import {
  describeCredentialsConformance,
  describeIdentityConformance,
  runStorageConformance,
} from "../../src/testing/index.js";

runStorageConformance("memory", async () => createMemoryStorage());

// One area supplied by a host, checked on its own: here the host's area is a second memory store.
describeIdentityConformance("memory with a mounted identity area", async () =>
  mountStorage(createMemoryStorage(), { identity: createMemoryStorage().identity }),
);
describeCredentialsConformance("memory with a mounted credentials area", async () =>
  mountStorage(createMemoryStorage(), { credentials: createMemoryStorage().credentials }),
);
