/**
 * Runs another bench server with a SIGTERM/SIGINT handler that exits normally, so `node --cpu-prof` can write its
 * profile.
 */
process.on("SIGTERM", () => process.exit(0));
process.on("SIGINT", () => process.exit(0));
await import(`./${process.env.SERVER}.ts`);
