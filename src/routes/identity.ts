import { describeCredential } from "../handlers/identity.js";
import { authed } from "./route-def.js";
import { meSchema } from "../schemas/identity.js";

export const identityRoutes = [
  authed({
    method: "GET",
    path: "/me",
    operationId: "getMe",
    auth: "bearer",
    scope: "data:read",
    tag: "Identity",
    summary: "What the token belongs to",
    responses: { 200: meSchema },
    handle: (_input, ctx) => describeCredential(ctx),
  }),
];
