// `npm install`'s prepare step. The `node` devDependency (node@22: the SQLite store's node:sqlite
// driver under test, see test/sqlite/drivers.test.ts) links node_modules/.bin/node, and npm puts
// node_modules/.bin first on the PATH of every script and npx: `npm test` and `npx vitest` would
// then run on Node 22 instead of the Node that runs npm, and load a native addon built for another
// Node. The link goes; the tests call node_modules/node/bin/node by its path.
import { lstatSync, readlinkSync, unlinkSync } from "node:fs";

for (const name of ["node", "node.cmd", "node.ps1"]) {
  const link = `node_modules/.bin/${name}`;
  try {
    const stat = lstatSync(link);
    const target = stat.isSymbolicLink() ? readlinkSync(link) : "";
    // Only the node@ devDependency's link (a shim on Windows): never a node the developer put there.
    if (!stat.isSymbolicLink() || target.includes("node/bin/node")) unlinkSync(link);
  } catch {
    // Not there: nothing to do.
  }
}
