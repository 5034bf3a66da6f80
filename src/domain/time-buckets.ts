/**
 * Time buckets of aggregates (../shared/aggregates.md, "Meaning"): a string
 * value read as ISO 8601 — a date `YYYY-MM-DD`, or a datetime
 * `YYYY-MM-DDTHH:MM[:SS[.f…]]` with `Z`, `±HH:MM` or no offset (UTC) —
 * converted to UTC and cut to an hour, day, week (its Monday), month,
 * quarter or year, written as a string. Anything else is in the null
 * bucket: another kind of value, another form of string, an impossible date
 * or time, or a bucket outside the years 0000–9999.
 *
 * This is the reference; `src/sql/time-bucket-compiler.ts` computes the same in SQL with
 * the same arithmetic (a datetime's offset moves its date by at most one
 * day, so no calendar library is involved on any store).
 */

export const TIME_UNITS = ["hour", "day", "week", "month", "quarter", "year"] as const;
export type TimeUnit = (typeof TIME_UNITS)[number];

/** Accepted forms: digits are ASCII, `T` and `Z` upper case, fractions of 1 to 9 digits. */
const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|([+-])(\d{2}):(\d{2}))?)?$/;

/** A UTC date and hour. */
interface UtcHour {
  year: number;
  month: number;
  day: number;
  hour: number;
}

/** The bucket of `value`, or null (the null bucket). */
export function timeBucket(unit: TimeUnit, value: unknown): string | null {
  const at = utcHour(value);
  if (at === null) return null;
  const { year, month, day, hour } = unit === "week" ? { ...mondayOf(at), hour: 0 } : at;
  if (year < 0 || year > 9999) return null;
  const y = pad(year, 4);
  switch (unit) {
    case "hour":
      return `${y}-${pad(month, 2)}-${pad(day, 2)}T${pad(hour, 2)}`;
    case "day":
    case "week":
      return `${y}-${pad(month, 2)}-${pad(day, 2)}`;
    case "month":
      return `${y}-${pad(month, 2)}`;
    case "quarter":
      return `${y}-Q${Math.floor((month - 1) / 3) + 1}`;
    case "year":
      return y;
  }
}

/** The UTC date and hour a string names, or null when it is not an accepted, possible date or datetime. */
function utcHour(value: unknown): UtcHour | null {
  if (typeof value !== "string") return null;
  const m = ISO.exec(value);
  if (m === null) return null;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return null;
  if (m[4] === undefined) return { year, month, day, hour: 0 };
  const [hour, minute, second] = [Number(m[4]), Number(m[5]), Number(m[6] ?? 0)];
  if (hour > 23 || minute > 59 || second > 59) return null;
  let offset = 0;
  if (m[7] !== undefined) {
    const [oh, om] = [Number(m[8]), Number(m[9])];
    if (oh > 23 || om > 59) return null;
    offset = (m[7] === "+" ? 1 : -1) * (oh * 60 + om);
  }
  // Minutes into the local day, moved to UTC: less than a day either way.
  const minutes = hour * 60 + minute - offset;
  const date =
    minutes < 0 ? dayBefore(year, month, day) : minutes >= 1440 ? dayAfter(year, month, day) : { year, month, day };
  return { ...date, hour: Math.floor((((minutes % 1440) + 1440) % 1440) / 60) };
}

type CivilDate = Omit<UtcHour, "hour">;

export function daysInMonth(year: number, month: number): number {
  if (month === 2) return isLeap(year) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

function isLeap(year: number): boolean {
  return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
}

function dayAfter(year: number, month: number, day: number): CivilDate {
  if (day < daysInMonth(year, month)) return { year, month, day: day + 1 };
  return month < 12 ? { year, month: month + 1, day: 1 } : { year: year + 1, month: 1, day: 1 };
}

function dayBefore(year: number, month: number, day: number): CivilDate {
  if (day > 1) return { year, month, day: day - 1 };
  return month > 1
    ? { year, month: month - 1, day: daysInMonth(year, month - 1) }
    : { year: year - 1, month: 12, day: 31 };
}

/** The Monday on or before a date (ISO weeks start on Monday). */
function mondayOf({ year, month, day }: CivilDate): CivilDate {
  const back = (weekday(year, month, day) + 6) % 7;
  if (day > back) return { year, month, day: day - back };
  if (month === 1) return { year: year - 1, month: 12, day: 31 + day - back };
  return { year, month: month - 1, day: daysInMonth(year, month - 1) + day - back };
}

/**
 * Day of the week, 0 for Sunday (Sakamoto's method), in the proleptic
 * Gregorian calendar. The year is moved 400 years on (the calendar repeats,
 * weekdays included), so year 0000 needs no negative division.
 */
export function weekday(year: number, month: number, day: number): number {
  const y = year + 400 - (month < 3 ? 1 : 0);
  const t = [0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4][month - 1]!;
  return (y + Math.floor(y / 4) - Math.floor(y / 100) + Math.floor(y / 400) + t + day) % 7;
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, "0");
}
