import type { Ports } from "../context/ports.js";
import { eventId } from "../domain/crypto.js";
import type { AuditEvent } from "../domain/model.js";
import { ApiError, notFound } from "../base/api-error.js";

/** Events the host reports into the audit feed beyond its own `recordAuditEvent`. */
export interface AuditAdmin {
  /**
   * Record an error a dashboard hit in the host's viewer (category `error`,
   * action `dashboard.error`, target the dashboard). It reaches feed readers
   * who ask for `category=error`. `at` is the writer's time (default: now).
   */
  recordDashboardError(input: {
    dashboardId: string;
    message: string;
    /** The signed-in viewer, when there was one. */
    userId?: string | null;
    ip?: string | null;
    userAgent?: string | null;
    at?: string;
    details?: Record<string, unknown>;
  }): Promise<AuditEvent>;
}

export function auditAdmin(ports: Ports): AuditAdmin {
  const { storage, clock } = ports;
  return {
    async recordDashboardError(input) {
      const dashboard = await storage.dashboards.getDashboard(input.dashboardId);
      if (!dashboard) throw notFound("dashboard");
      if (input.message.trim() === "") {
        throw new ApiError(400, "invalid_parameter", "an error needs a message", { details: { parameter: "message" } });
      }
      if (input.at !== undefined && Number.isNaN(Date.parse(input.at))) {
        throw new ApiError(400, "invalid_parameter", "at must be an ISO 8601 timestamp", {
          details: { parameter: "at" },
        });
      }
      const user = input.userId ? await storage.identity.getUser(input.userId) : null;
      const event: AuditEvent = {
        id: eventId(),
        teamId: dashboard.teamId,
        time: input.at ?? new Date(clock.now()).toISOString(),
        category: "error",
        action: "dashboard.error",
        actor: user ? { type: "user", id: user.id, email: user.email } : null,
        target: { type: "dashboard", id: dashboard.id },
        outcome: "failure",
        ip: input.ip ?? null,
        userAgent: input.userAgent ?? null,
        details: { ...input.details, message: input.message },
      };
      await storage.audit.appendAuditEvent(event, clock.now());
      return event;
    },
  };
}
