import type { Row } from "../domain/model.js";

/**
 * The rows of a bulk write as JSON texts, a staging batch at a time, for the
 * SQL stores (`writeDatasetRows`). Sync iterables are read without a promise
 * per row; `close()` lets the producer stop (close its stream) when the write
 * fails while it still has rows.
 */
export function rowBatches(rows: AsyncIterable<Row> | Iterable<Row>) {
  const asyncRows = Symbol.asyncIterator in rows ? (rows as AsyncIterable<Row>)[Symbol.asyncIterator]() : null;
  const syncRows = asyncRows ? null : (rows as Iterable<Row>)[Symbol.iterator]();
  let finished = false;
  return {
    /** Up to `maxRows` rows, or fewer once their texts reach `maxChars` characters. */
    async next(maxRows: number, maxChars = Number.POSITIVE_INFINITY): Promise<{ texts: string[]; done: boolean }> {
      const texts: string[] = [];
      let chars = 0;
      while (texts.length < maxRows && chars < maxChars) {
        let step: IteratorResult<Row>;
        try {
          step = asyncRows ? await asyncRows.next() : syncRows!.next();
        } catch (error) {
          finished = true; // a throwing iterator is done
          throw error;
        }
        if (step.done) {
          finished = true;
          return { texts, done: true };
        }
        const text = JSON.stringify(step.value);
        texts.push(text);
        chars += text.length;
      }
      return { texts, done: false };
    },
    async close(): Promise<void> {
      if (finished) return;
      finished = true;
      try {
        if (asyncRows) await asyncRows.return?.();
        else syncRows!.return?.();
      } catch {
        // The write's own error is the one to report.
      }
    },
  };
}
