/** Options of `collect`. */
export interface CollectOptions {
  /** The most items returned: iteration stops there, so no page past them is fetched. Required, a positive integer. */
  max: number;
}

/** What the `iterateRows` methods return: an async iterator of rows that can also be collected into an array. */
export interface Paged<T> extends AsyncGenerator<T, void, undefined> {
  /** The first `max` items (fewer when there are fewer), as an array. */
  collect(options: CollectOptions): Promise<T[]>;
}

/** An async generator with `collect`. */
export function paged<T>(generate: () => AsyncGenerator<T, void, undefined>): Paged<T> {
  const generator = generate();
  return Object.assign(generator, { collect: (options: CollectOptions) => collect(generator, options) });
}

/**
 * Up to `max` items of `items`, as an array. A cap is required so that a
 * result set larger than expected cannot fill memory; leaving the loop closes
 * the iterator, so no further page is requested.
 */
export async function collect<T>(items: AsyncIterable<T>, options: CollectOptions): Promise<T[]> {
  const { max } = options;
  if (!Number.isSafeInteger(max) || max < 1)
    throw new RangeError(`collect: max must be a positive integer, not ${String(max)}`);
  const out: T[] = [];
  for await (const item of items) {
    out.push(item);
    if (out.length >= max) break;
  }
  return out;
}
