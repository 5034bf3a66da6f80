import type { ChangeFeedReads, ChangeRetention, DatasetChangeFeeds } from "../ports/storage/changes.js";

/** A store's change log as the dataset rows' area serves it (`DatasetChangeFeeds`). */
export function datasetChangeFeeds(log: ChangeFeedReads & ChangeRetention): DatasetChangeFeeds {
  return {
    readDatasetChanges: (datasetId, query) => log.read(datasetId, query),
    datasetChangesHead: (datasetId) => log.head(datasetId),
    trimDatasetChanges: (storedBefore) => log.trimChanges(storedBefore),
  };
}
