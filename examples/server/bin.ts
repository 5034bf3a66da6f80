#!/usr/bin/env node
/**
 * The package's `dataport` command: `npx dataport [flags]` runs the example
 * server from the built package (dist/bin/dataport.js), with the demo
 * fixture shipped beside it (dist/demo/space.json, copied there by the
 * build) and, unless --db says otherwise, an in-memory store: nothing is
 * written into the package or the current directory.
 */
import { fileURLToPath } from "node:url";
import { runServerCommand } from "./run.js";

await runServerCommand(process.argv.slice(2), {
  command: "npx dataport",
  defaults: { fixture: fileURLToPath(new URL("../demo/space.json", import.meta.url)), db: ":memory:" },
});
