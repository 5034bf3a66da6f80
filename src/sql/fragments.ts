/**
 * SQL fragments whose values are always bound parameters, rendered with the
 * placeholders of each dialect (`?` on SQLite, `$n` on PostgreSQL).
 */

/** SQL text with bound values: `strings` around `values` (one more string than values). */
export class Sql {
  constructor(
    readonly strings: readonly string[],
    readonly values: readonly unknown[],
  ) {}
}

/** A fragment: interpolated `Sql` is inlined, anything else becomes a bound parameter. */
export function sql(strings: TemplateStringsArray, ...values: unknown[]): Sql {
  const outStrings: string[] = [strings[0]!];
  const outValues: unknown[] = [];
  values.forEach((value, i) => {
    if (value instanceof Sql) {
      outStrings[outStrings.length - 1] += value.strings[0]!;
      for (let j = 0; j < value.values.length; j++) {
        outValues.push(value.values[j]);
        outStrings.push(value.strings[j + 1]!);
      }
      outStrings[outStrings.length - 1] += strings[i + 1]!;
    } else {
      outValues.push(value);
      outStrings.push(strings[i + 1]!);
    }
  });
  return new Sql(outStrings, outValues);
}

/** Trusted SQL text (a column name of the store's own schema), never a value. */
export function raw(text: string): Sql {
  return new Sql([text], []);
}

export function join(parts: readonly Sql[], separator: string): Sql {
  return parts.reduce((out, part, i) => (i === 0 ? part : sql`${out}${raw(separator)}${part}`), raw(""));
}

/** SQLite: `?` placeholders, values in order. */
export function renderPositional(fragment: Sql): { text: string; params: unknown[] } {
  return { text: fragment.strings.join("?"), params: [...fragment.values] };
}

/** PostgreSQL: `$n` placeholders numbered after the `params` already there, which receive the values. */
export function renderNumbered(fragment: Sql, params: unknown[]): string {
  let text = fragment.strings[0]!;
  fragment.values.forEach((value, i) => {
    text += `$${params.push(value)}${fragment.strings[i + 1]!}`;
  });
  return text;
}
