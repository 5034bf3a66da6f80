const DAY_MS = 86_400_000;
/** 10000-01-01T00:00:00Z: from here on (and before 1970) `toISOString` writes the year with six digits and a sign. */
const YEAR_10000_MS = 253_402_300_800_000;

/**
 * `new Date(ms).toISOString()`, for the instants the hot paths stamp (every
 * usage-log call and webhook row): worked out with integer arithmetic, about
 * three times faster than building a Date and formatting it. Instants before
 * 1970 or from the year 10000 on are left to `toISOString`.
 */
export function isoTime(ms: number): string {
  if (!(ms >= 0 && ms < YEAR_10000_MS)) return new Date(ms).toISOString();
  const whole = Math.floor(ms);
  const days = Math.floor(whole / DAY_MS);
  let rest = whole - days * DAY_MS;
  const { year, month, day } = civilDate(days);
  const hours = Math.floor(rest / 3_600_000);
  rest -= hours * 3_600_000;
  const minutes = Math.floor(rest / 60_000);
  rest -= minutes * 60_000;
  const seconds = Math.floor(rest / 1000);
  const millis = rest - seconds * 1000;
  return `${year}-${two(month)}-${two(day)}T${two(hours)}:${two(minutes)}:${two(seconds)}.${millis < 10 ? "00" : millis < 100 ? "0" : ""}${millis}Z`;
}

/** The proleptic Gregorian date `days` after 1970-01-01 (H. Hinnant's `civil_from_days`). */
function civilDate(days: number): { year: number; month: number; day: number } {
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const dayOfEra = z - era * 146_097;
  const yearOfEra = Math.floor(
    (dayOfEra - Math.floor(dayOfEra / 1460) + Math.floor(dayOfEra / 36_524) - Math.floor(dayOfEra / 146_096)) / 365,
  );
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const shiftedMonth = Math.floor((5 * dayOfYear + 2) / 153); // 0 = March
  const month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9;
  return {
    year: yearOfEra + era * 400 + (month <= 2 ? 1 : 0),
    month,
    day: dayOfYear - Math.floor((153 * shiftedMonth + 2) / 5) + 1,
  };
}

function two(n: number): string {
  return n < 10 ? `0${n}` : `${n}`;
}
