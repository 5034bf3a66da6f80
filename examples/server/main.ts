/**
 * The example server from the repository: `npm start -- [flags]` (see README).
 * Stores what is written in .data/dataport.sqlite unless --db says otherwise.
 */
import { fileURLToPath } from "node:url";
import { runServerCommand } from "./run.js";

const root = fileURLToPath(new URL("../..", import.meta.url));

await runServerCommand(process.argv.slice(2), {
  command: "npm start --",
  defaults: { fixture: `${root}examples/demo/space.json`, db: `${root}.data/dataport.sqlite` },
});
