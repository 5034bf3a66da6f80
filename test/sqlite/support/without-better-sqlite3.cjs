// `node --require` this: better-sqlite3 is not installed, as in an install where it could not build.
const Module = require("node:module");
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request === "better-sqlite3") throw Object.assign(new Error(`Cannot find module '${request}'`), { code: "MODULE_NOT_FOUND" });
  return resolve.call(this, request, ...rest);
};
