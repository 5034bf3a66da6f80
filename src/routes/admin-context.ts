import type { Admin } from "../admin/index.js";
import type { HandlerContext } from "../context/handler.js";

/** Context of an admin route: the admin functions, and who makes the change (`X-Actor-User-Id`). */
export interface AdminContext extends HandlerContext {
  admin: Admin;
  actorUserId: string | null;
}
