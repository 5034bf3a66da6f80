import { z } from "zod";
import { SCOPES, type Role, type Scope } from "../domain/model.js";

const ROLES = ["owner", "admin", "editor", "viewer"] as const satisfies readonly Role[];

export const meApiKeySchema = z
  .object({
    kind: z.literal("api-key"),
    name: z.string(),
    scopes: z.array(z.enum(SCOPES as [Scope, ...Scope[]])),
    teams: z.array(z.object({ id: z.string(), name: z.string() })),
    allowlist: z.object({
      datasets: z.array(z.string()),
      connections: z.array(z.string()),
      tables: z.array(z.string()),
    }),
  })
  .meta({ id: "MeApiKey", description: "An API key: its scopes, its team and what it may reach" });

export const meSessionSchema = z
  .object({
    kind: z.literal("session-token"),
    teams: z.array(z.object({ id: z.string(), name: z.string(), isPersonal: z.boolean(), role: z.enum(ROLES) })),
  })
  .meta({ id: "MeSession", description: "A session token: the person's teams and roles" });

export const meSchema = z
  .discriminatedUnion("kind", [meApiKeySchema, meSessionSchema])
  .meta({ id: "Me", description: "What the token belongs to" });
