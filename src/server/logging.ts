import type { ErrorLogFields, Logger, RequestLogLine } from "../ports/logger.js";

/** The library's default: nothing per request, errors to `console.error` (with the request id when there is one). */
export const consoleErrorLogger: Logger = {
  error(message, error, fields) {
    const where = fields?.requestId ? ` (request ${fields.requestId})` : "";
    console.error(`[dataport] ${message}${where}`, error ?? "");
  },
};

/** A `logger` option as a Logger: a plain function (the older form) receives errors only. */
export function toLogger(option: Logger | ((message: string, error?: unknown) => void) | undefined): Logger {
  if (option === undefined) return consoleErrorLogger;
  if (typeof option === "function") {
    return {
      error: (message, error, fields) =>
        option(fields?.requestId ? `${message} (request ${fields.requestId})` : message, error),
    };
  }
  return option;
}

export interface JsonLoggerOptions {
  /** Receives one JSON text per line, without the newline. Default: `console.log` (stdout). */
  write?: (line: string) => void;
  /** Write a line per request (default true); errors are always written. */
  requests?: boolean;
  /** Time of an error line. Default: the real time. */
  now?: () => number;
}

/**
 * JSON lines: `{"level":"info","msg":"request",…RequestLogLine}` per request,
 * `{"level":"error","msg":…,"requestId":…,"error":{"name","message","stack"}}`
 * per error and `{"level":"info","msg":"upload progress",…}` while a long
 * upload runs — what a log shipper (Vector, Fluent Bit, Loki) ingests as is.
 */
export function createJsonLogger(options: JsonLoggerOptions = {}): Logger {
  const write = options.write ?? ((line: string) => console.log(line));
  const now = options.now ?? Date.now;
  const logger: Logger = {
    error(message: string, error?: unknown, fields?: ErrorLogFields) {
      const line: Record<string, unknown> = { level: "error", time: new Date(now()).toISOString(), msg: message };
      if (fields?.requestId !== undefined) line.requestId = fields.requestId;
      if (error !== undefined) line.error = describeError(error);
      write(JSON.stringify(line));
    },
  };
  if (options.requests !== false) {
    logger.request = (line: RequestLogLine) => write(JSON.stringify({ level: "info", msg: "request", ...line }));
  }
  logger.info = (message, fields) =>
    write(JSON.stringify({ level: "info", time: new Date(now()).toISOString(), msg: message, ...fields }));
  return logger;
}

function describeError(error: unknown): Record<string, unknown> | string {
  if (error instanceof Error) return { name: error.name, message: error.message, stack: error.stack ?? null };
  try {
    return JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}
