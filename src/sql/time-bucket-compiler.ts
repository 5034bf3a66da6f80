import { raw, type Sql, sql } from "./fragments.js";
import type { TimeUnit } from "../domain/time-buckets.js";

/**
 * Time buckets in SQL, the same on SQLite and PostgreSQL and the same
 * arithmetic as the reference (`time-buckets.ts`): no date type or calendar
 * function of either database is involved (PostgreSQL has no year 0000 and
 * refuses an impossible date with an error, SQLite moves it to the next
 * month). A value is checked for its form, then for a possible date and
 * time, then moved to UTC — at most one day either way — and cut.
 *
 * The work is split in stages (`bucketStages`), each reading the columns of
 * the stage before, so that the caller can compute each column once per
 * row (see `aggregate-compiler.ts`); `bucketSql` reads the last stage.
 */

/** How a database writes the few things that differ. */
export interface BucketSqlDialect {
  /**
   * Whether a text (or NULL) has one of the accepted forms:
   * `^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})?)?$`, ASCII digits.
   */
  isoForm(text: Sql): Sql;
  /** An integer read from ASCII digits. */
  integer(digits: Sql): Sql;
  /** A non-negative integer as `width` digits, zero-padded. */
  digits(value: Sql, width: number): Sql;
}

/** Stage columns of one bucketed column, named from `prefix` (unique to that column). */
export function bucketStages(prefix: string, text: Sql, d: BucketSqlDialect): Array<Array<[string, Sql]>> {
  const c = (name: string) => raw(prefix + name);
  const iso = c("iso");
  const at = (start: string, length: number) => d.integer(sql`substr(${iso}, ${raw(start)}, ${raw(String(length))})`);
  const hasSeconds = sql`(length(${iso}) >= 19 AND substr(${iso}, 17, 1) = ':')`;
  const offsetSign = sql`substr(${iso}, length(${iso}) - 5, 1)`;
  const [offsetHours, offsetMinutes] = [at(`length(${prefix}iso) - 4`, 2), at(`length(${prefix}iso) - 1`, 2)];
  const offset = sql`(${offsetHours} * 60 + ${offsetMinutes})`;
  // CASE, not OR: PostgreSQL may evaluate both sides of an OR, and digits that are not there fail its cast.
  const timeOk = sql`(${at("12", 2)} <= 23 AND ${at("15", 2)} <= 59
    AND (CASE WHEN ${hasSeconds} THEN ${at("18", 2)} <= 59 ELSE TRUE END)
    AND (CASE WHEN ${offsetSign} IN ('+', '-') THEN ${offsetHours} <= 23 AND ${offsetMinutes} <= 59 ELSE TRUE END))`;

  const [y, mo, day, lm, ok] = [c("y"), c("mo"), c("d"), c("lm"), c("ok")];
  const valid = sql`(${ok} = 1 AND ${mo} BETWEEN 1 AND 12 AND ${day} BETWEEN 1 AND ${daysInMonth(y, mo)})`;
  const utc = (value: Sql) => sql`(CASE WHEN ${valid} THEN ${value} END)`;
  const [after, before] = [sql`${lm} >= 1440`, sql`${lm} < 0`];
  const monthEnd = sql`${day} = ${daysInMonth(y, mo)}`;
  const nextMonth = sql`(CASE WHEN ${mo} = 12 THEN 1 ELSE ${mo} + 1 END)`;
  const previousMonth = sql`(CASE WHEN ${mo} = 1 THEN 12 ELSE ${mo} - 1 END)`;
  const previousMonthEnd = sql`(CASE WHEN ${mo} = 1 THEN 31 ELSE ${daysInMonth(y, sql`${mo} - 1`)} END)`;
  const stages: Array<Array<[string, Sql]>> = [
    [["iso", sql`(CASE WHEN ${d.isoForm(text)} THEN ${text} END)`]],
    [
      ["y", at("1", 4)],
      ["mo", at("6", 2)],
      ["d", at("9", 2)],
      // Minutes into the local day, moved to UTC by the offset: from -1439 to 2878.
      [
        "lm",
        sql`(CASE WHEN length(${iso}) = 10 THEN 0 ELSE ${at("12", 2)} * 60 + ${at("15", 2)}
          - (CASE ${offsetSign} WHEN '+' THEN ${offset} WHEN '-' THEN -${offset} ELSE 0 END) END)`,
      ],
      ["ok", sql`(CASE WHEN ${iso} IS NULL THEN 0 WHEN length(${iso}) = 10 THEN 1 WHEN ${timeOk} THEN 1 ELSE 0 END)`],
    ],
    // The UTC date and hour: the local date, or the day after or before it.
    [
      [
        "uy",
        utc(sql`(CASE WHEN ${after} AND ${monthEnd} AND ${mo} = 12 THEN ${y} + 1
          WHEN ${before} AND ${day} = 1 AND ${mo} = 1 THEN ${y} - 1 ELSE ${y} END)`),
      ],
      [
        "um",
        utc(sql`(CASE WHEN ${after} AND ${monthEnd} THEN ${nextMonth}
          WHEN ${before} AND ${day} = 1 THEN ${previousMonth} ELSE ${mo} END)`),
      ],
      [
        "ud",
        utc(sql`(CASE WHEN ${after} THEN (CASE WHEN ${monthEnd} THEN 1 ELSE ${day} + 1 END)
          WHEN ${before} THEN (CASE WHEN ${day} > 1 THEN ${day} - 1 ELSE ${previousMonthEnd} END) ELSE ${day} END)`),
      ],
      ["uh", utc(sql`((${lm} + 1440) % 1440) / 60`)],
    ],
  ];
  return stages.map((stage) => stage.map(([name, expression]) => [prefix + name, expression]));
}

/** The bucket (text, or NULL) from the last stage of `bucketStages(prefix, …)`. */
export function bucketSql(unit: TimeUnit, prefix: string, d: BucketSqlDialect): Sql {
  const [y, m, day, h] = [raw(`${prefix}uy`), raw(`${prefix}um`), raw(`${prefix}ud`), raw(`${prefix}uh`)];
  if (unit === "week") return mondaySql(y, m, day, d);
  const year = d.digits(y, 4);
  const cut = {
    hour: sql`${year} || '-' || ${d.digits(m, 2)} || '-' || ${d.digits(day, 2)} || 'T' || ${d.digits(h, 2)}`,
    day: sql`${year} || '-' || ${d.digits(m, 2)} || '-' || ${d.digits(day, 2)}`,
    month: sql`${year} || '-' || ${d.digits(m, 2)}`,
    quarter: sql`${year} || '-Q' || ${d.digits(sql`(${m} + 2) / 3`, 1)}`,
    year,
  }[unit];
  return sql`(CASE WHEN ${y} BETWEEN 0 AND 9999 THEN ${cut} END)`;
}

/**
 * The bucket from the stored buckets of a value (the typed copy of declared
 * columns, dataset-values.ts): its UTC `hour` (`YYYY-MM-DDTHH`) and `week`
 * (its Monday), each NULL when the value has no bucket; the others are cut
 * from the hour.
 */
export function storedBucketSql(unit: TimeUnit, stored: StoredBuckets, d: BucketSqlDialect): Sql {
  const { hour, week } = stored;
  switch (unit) {
    case "hour":
      return hour;
    case "day":
      return sql`substr(${hour}, 1, 10)`;
    case "week":
      return week;
    case "month":
      return sql`substr(${hour}, 1, 7)`;
    case "quarter":
      return sql`(substr(${hour}, 1, 4) || '-Q' || ${d.digits(sql`(${d.integer(sql`substr(${hour}, 6, 2)`)} + 2) / 3`, 1)})`;
    case "year":
      return sql`substr(${hour}, 1, 4)`;
  }
}

/** A value's stored hour and week buckets (SQL columns). */
export interface StoredBuckets {
  hour: Sql;
  week: Sql;
}

/** The Monday on or before a UTC date, as `YYYY-MM-DD` (NULL outside the years 0000–9999). */
function mondaySql(y: Sql, m: Sql, day: Sql, d: BucketSqlDialect): Sql {
  // Days back to Monday: (weekday + 6) % 7, weekday by Sakamoto's method, 0 for Sunday; 400 years on, the
  // calendar and its weekdays repeat, so the year is never negative.
  const year = sql`(${y} + 400 - (CASE WHEN ${m} < 3 THEN 1 ELSE 0 END))`;
  const monthTerm = d.integer(sql`substr('032503514624', ${m}, 1)`);
  const weekday = sql`((${year} + ${year} / 4 - ${year} / 100 + ${year} / 400 + ${monthTerm} + ${day}) % 7)`;
  const back = sql`((${weekday} + 6) % 7)`;
  const inMonth = sql`${day} > ${back}`;
  const mondayYear = sql`(CASE WHEN ${inMonth} OR ${m} > 1 THEN ${y} ELSE ${y} - 1 END)`;
  const mondayMonth = sql`(CASE WHEN ${inMonth} THEN ${m} WHEN ${m} > 1 THEN ${m} - 1 ELSE 12 END)`;
  const previousMonthEnd = sql`(CASE WHEN ${m} > 1 THEN ${daysInMonth(y, sql`${m} - 1`)} ELSE 31 END)`;
  const mondayDay = sql`(CASE WHEN ${inMonth} THEN ${day} - ${back} ELSE ${previousMonthEnd} + ${day} - ${back} END)`;
  const [yyyy, mm, dd] = [d.digits(mondayYear, 4), d.digits(mondayMonth, 2), d.digits(mondayDay, 2)];
  const text = sql`${yyyy} || '-' || ${mm} || '-' || ${dd}`;
  return sql`(CASE WHEN ${mondayYear} BETWEEN 0 AND 9999 THEN ${text} END)`;
}

/** Days in a month (1–12) of a year (0 or more), proleptic Gregorian. */
function daysInMonth(year: Sql, month: Sql): Sql {
  const [y, m] = [sql`(${year})`, sql`(${month})`];
  const leap = sql`${y} % 4 = 0 AND (${y} % 100 <> 0 OR ${y} % 400 = 0)`;
  return sql`(CASE WHEN ${m} = 2 THEN (CASE WHEN ${leap} THEN 29 ELSE 28 END) ELSE 30 + (${m} + ${m} / 8) % 2 END)`;
}
