/**
 * An inclusive window of UTC days, `YYYY-MM-DD`. An event belongs to the
 * UTC day of its instant: a timestamp written with an offset
 * (`2026-10-31T23:30:00-02:00`) counts on its UTC day (`2026-11-01`).
 */
export interface DayWindow {
  fromDay: string;
  toDay: string;
}

const DAY_MS = 86_400_000;

/** The UTC day (`YYYY-MM-DD`) of an instant given in epoch ms or as an ISO 8601 string (any offset). */
export function utcDay(at: number | string): string {
  // Fast path: an ISO instant already in UTC ("…Z") starts with its UTC day.
  if (
    typeof at === "string" &&
    at.length >= 20 &&
    at.charCodeAt(at.length - 1) === 90 /* Z */ &&
    at.charCodeAt(10) === 84 /* T */
  ) {
    return at.slice(0, 10);
  }
  const ms = typeof at === "number" ? at : Date.parse(at);
  return new Date(ms).toISOString().slice(0, 10);
}

/** The window of `days` UTC days ending today (by `nowMs`): `days=1` is today alone. */
export function dayWindow(nowMs: number, days: number): DayWindow {
  const today = Math.floor(nowMs / DAY_MS) * DAY_MS;
  return { fromDay: utcDay(today - (days - 1) * DAY_MS), toDay: utcDay(today) };
}

/** Every day of a window, oldest first. */
export function daysOf(window: DayWindow): string[] {
  const out: string[] = [];
  const end = Date.parse(`${window.toDay}T00:00:00Z`);
  for (let ms = Date.parse(`${window.fromDay}T00:00:00Z`); ms <= end; ms += DAY_MS) out.push(utcDay(ms));
  return out;
}
