import type { Connector } from "../ports/connector.js";
import { ApiError } from "../errors.js";

/** Placeholder until the connections issue lands: the memory connector answers nothing yet. */
export function memoryConnector(): Connector {
  return {
    spatial: true,
    async query() {
      throw new ApiError(503, "upstream_unavailable", "connection queries are not available yet");
    },
  };
}
