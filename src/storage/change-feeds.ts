import type { ChangeFeedReads, ChangeRetention, DatasetChangeFeeds, WatchChanges } from "../ports/storage/changes.js";
import type { RowPage, RowQuery, RowStore } from "../ports/storage/rows.js";

/** A store's change log as the dataset rows' area serves it (`DatasetChangeFeeds`). */
export function datasetChangeFeeds(
  log: ChangeFeedReads & ChangeRetention & { watch?: WatchChanges },
): DatasetChangeFeeds {
  const feeds: DatasetChangeFeeds = {
    readDatasetChanges: (datasetId, query) => log.read(datasetId, query),
    datasetChangesHead: (datasetId) => log.head(datasetId),
    trimDatasetChanges: (storedBefore) => log.trimChanges(storedBefore),
  };
  if (log.watch) feeds.watchDatasetChanges = log.watch;
  return feeds;
}

/**
 * A `WatchChanges` that looks at a counter of the whole log (`last`: the
 * highest position committed, by any process) every `intervalMs` while
 * someone listens and the store is `open()`: one cheap query per process,
 * however many readers wait. The timer never keeps the process alive, and
 * stops for good once the store is closed.
 */
export function pollingWatch(
  last: () => Promise<string>,
  intervalMs: number,
  open: () => boolean,
  log: (message: string, error: unknown) => void,
): WatchChanges {
  const listeners = new Set<(feedId: string | null) => void>();
  let timer: ReturnType<typeof setInterval> | null = null;
  let seen: string | null = null;
  let busy = false;
  const stop = () => {
    if (timer !== null) clearInterval(timer);
    timer = null;
  };
  const look = async () => {
    if (!open()) return stop();
    if (busy) return;
    busy = true;
    try {
      const now = await last();
      if (seen !== null && now !== seen) for (const listener of listeners) listener(null);
      seen = now;
    } catch (error) {
      log("the change log could not be watched; waiting readers look again after their wait", error);
    } finally {
      busy = false;
    }
  };
  return (onChange) => {
    listeners.add(onChange);
    if (timer === null) {
      seen = null;
      void look();
      timer = setInterval(() => void look(), intervalMs);
      timer.unref?.();
    }
    return () => {
      listeners.delete(onChange);
      if (listeners.size === 0) stop();
    };
  };
}

/**
 * `rows` whose pages carry `changesHead` when asked, for a store (or a host's
 * rows area) that reads its feed's head apart from its pages: the head is
 * read BEFORE the page, so every change up to it is in the page's rows. A
 * page that already carries its own keeps it. Everything else is `rows`' own.
 */
export function headBeforePage<R extends RowStore & Pick<DatasetChangeFeeds, "datasetChangesHead">>(rows: R): R {
  const readDatasetRows = async (datasetId: string, query: RowQuery): Promise<RowPage> => {
    if (!query.changesHead) return rows.readDatasetRows(datasetId, query);
    const head = await rows.datasetChangesHead(datasetId);
    const page = await rows.readDatasetRows(datasetId, query);
    if (page.changesHead === undefined) page.changesHead = head;
    return page;
  };
  return new Proxy(rows, {
    get: (target, name, receiver) =>
      name === "readDatasetRows" ? readDatasetRows : Reflect.get(target, name, receiver),
  });
}
