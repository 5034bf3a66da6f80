import type { Change } from "../../domain/changes.js";

export type { Change, ChangeOp } from "../../domain/changes.js";

export interface StoredChange {
  /**
   * The change's position in the store's change log: a decimal string, increasing in the order changes became readable.
   */
  position: string;
  change: Change;
}

/** A page of one feed (a dataset's or a table's changes). */
export interface ChangesQuery {
  /** Changes after this position; null: from the oldest change retention kept (never `expired`). */
  after: string | null;
  /** At most this many changes (>= 1). */
  limit: number;
}

export interface ChangesPage {
  changes: StoredChange[];
  /** True exactly when a read from the last returned position would return at least one change. */
  hasMore: boolean;
  /**
   * True when changes of this feed after `after` were removed by retention
   * (`trimChanges`): the page is empty and the reader must re-read the rows.
   */
  expired: boolean;
  /**
   * How long the oldest write still open that holds this read back has been
   * open, in ms (stores whose writes become readable out of position order:
   * PostgreSQL); 0 or absent: none. As `AuditStore.readAuditEvents` says.
   */
  heldBackMs?: number;
}

/**
 * The change log of a store: every write to a table's or dataset's rows
 * appends its changes in the SAME commit as the write (a transaction, or
 * the group commit the write rides on), so there is never a change without
 * its write nor a write without its change. It is one mechanism with the
 * audit feed: positions are drawn from one sequence per store, a read is a
 * keyset page in position order, and it stops at the feed's horizon, so a
 * position once read is never followed by a lower one becoming readable
 * (exactly once, in order, across processes). The conformance suite
 * (`src/testing/conformance/changes.ts`) is the executable form.
 *
 * Each area that owns rows (tables; dataset rows) serves the feeds of its
 * ids through these methods, named for the area.
 */
export interface ChangeFeedReads {
  /** A keyset page of the feed's changes after `query.after`; cost MUST NOT grow with the changes before it. */
  read(feedId: string, query: ChangesQuery): Promise<ChangesPage>;
  /**
   * The position a rows read made AFTER this call resolves hands over from:
   * every change of the feed at or below it is reflected in such a read.
   */
  head(feedId: string): Promise<string>;
}

/**
 * Optional: a signal that changes were committed, for long-polling readers
 * (one listener per process serves them all). `onChange` is called soon
 * after a change of any feed of the log is committed by ANY process sharing
 * the store (within about a second), with the feed's id when the store
 * knows it and null when it does not (then every waiting reader looks).
 * Returns a function that stops the calls. A store without it leaves its
 * readers to look every second. It MAY also call with null when it cannot
 * tell what it missed (a signal lost and regained). How each store knows:
 * the memory store signals its own writes; SQLite looks at its counter
 * every 200 ms while someone listens; PostgreSQL hears a NOTIFY per
 * committed statement's feed on one listening connection per process
 * (writers notify only while some instance is subscribed: its row in
 * `change_waiters`), and looks at its sequence every 250 ms only while that
 * connection is down.
 * Waiting costs no store query per reader, and on PostgreSQL none at all.
 */
export type WatchChanges = (onChange: (feedId: string | null) => void) => () => void;

/** What a change log keeps about retention: removing changes stored before a time. */
export interface ChangeRetention {
  /**
   * Remove changes stored before `storedBefore` (epoch ms). A later read
   * after a position below a removed change of its feed answers `expired`.
   * The store's log may be shared by its areas: one call may trim every
   * area's feeds (they follow one retention).
   */
  trimChanges(storedBefore: number): Promise<void>;
}

/**
 * The change feeds of upload and connection datasets (webhook datasets
 * among them), served by the area that holds their rows: a webhook
 * delivery appends its `insert` (and, when retention removed rows, one
 * `trim` naming the last of them), an append its rows' inserts, a replace
 * or refresh a `reset`, each in the SAME commit as the write. A deleted
 * dataset's changes go with it. Meanings as `ChangeFeedReads` and
 * `ChangeRetention` say.
 */
export interface DatasetChangeFeeds {
  readDatasetChanges(datasetId: string, query: ChangesQuery): Promise<ChangesPage>;
  datasetChangesHead(datasetId: string): Promise<string>;
  trimDatasetChanges(storedBefore: number): Promise<void>;
  /** `WatchChanges`, for the datasets' feeds. */
  watchDatasetChanges?: WatchChanges;
}
