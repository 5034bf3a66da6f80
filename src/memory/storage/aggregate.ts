import { utcDay } from "../../domain/days.js";
import type { DashboardView } from "../../domain/model.js";
import type { DayWindow } from "../../domain/days.js";
import type { MemoryState } from "./state.js";

// Helpers the memory store's dashboards and usage areas share.

/** `push(...items)` without its limit on the number of arguments. */
export function appendAll<T>(target: T[], items: readonly T[]): void {
  for (const item of items) target.push(item);
}

/** Group items by a composite key, keeping first-seen order inside each group. */
export function groupBy<T>(items: readonly T[], key: (item: T) => unknown[]): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = JSON.stringify(key(item));
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}

export function distinct<T>(items: readonly T[], key: (item: T) => unknown): number {
  return new Set(items.map(key)).size;
}

export function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}

/** Binary (code unit) order, null first. */
export function compare(a: string | null, b: string | null): number {
  if (a === b) return 0;
  if (a === null) return -1;
  if (b === null) return 1;
  return a < b ? -1 : 1;
}

/** Non-editor views of the dashboards within the window, with their UTC day. */
export function viewsIn(
  state: MemoryState,
  dashboardIds: ReadonlySet<string>,
  window: DayWindow,
): { view: DashboardView; day: string }[] {
  return state.dashboardViews.flatMap((view) => {
    if (view.editor || !dashboardIds.has(view.dashboardId)) return [];
    const day = utcDay(view.at);
    return day >= window.fromDay && day <= window.toDay ? [{ view, day }] : [];
  });
}
