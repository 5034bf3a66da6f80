import { z } from "zod";
import { describeCredential } from "../handlers/identity.js";
import { authed } from "../routing.js";

const meResponse = z.union([
  z.object({
    kind: z.literal("api-key"),
    name: z.string(),
    scopes: z.array(z.string()),
    teams: z.array(z.object({ id: z.string(), name: z.string() })),
    allowlist: z.object({ datasets: z.array(z.string()), connections: z.array(z.string()), tables: z.array(z.string()) }),
  }),
  z.object({
    kind: z.literal("session-token"),
    teams: z.array(z.object({ id: z.string(), name: z.string(), isPersonal: z.boolean(), role: z.string() })),
  }),
]);

export const identityRoutes = [
  authed({
    method: "GET",
    path: "/me",
    auth: "bearer",
    scope: "data:read",
    tag: "Identity",
    summary: "What the token belongs to",
    responses: { 200: meResponse },
    handle: (_input, ctx) => describeCredential(ctx),
  }),
];
