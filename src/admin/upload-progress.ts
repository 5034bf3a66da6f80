import type { Clock } from "../base/clock.js";

/** How far an upload has come: what `onProgress` receives. */
export interface UploadProgress {
  /** Rows read and handed to the store so far. */
  rows: number;
  /** Bytes of the body read so far. */
  bytes: number;
  /** Milliseconds since the upload began, by the API's clock. */
  elapsedMs: number;
}

/** What an upload may be told besides its actor: who hears of its progress, and how often. */
export interface UploadProgressOptions {
  /**
   * Called while the body is read (a 1,000,000-row upload takes tens of
   * seconds), at most once per `progressEveryMs`; not after the call
   * settles. A callback that throws is ignored.
   */
  onProgress?: (progress: UploadProgress) => void;
  /** The least time between two `onProgress` calls, in ms (default 1000). */
  progressEveryMs?: number;
}

/** Counts an upload's bytes and rows and reports them on the clock; null when nobody listens. */
export function uploadMeter(options: UploadProgressOptions | undefined, clock: Clock): UploadMeter | null {
  const onProgress = options?.onProgress;
  if (typeof onProgress !== "function") return null;
  return new UploadMeter(onProgress, Math.max(0, options?.progressEveryMs ?? 1000), clock);
}

export class UploadMeter {
  private rows = 0;
  private bytes = 0;
  private readonly startedAt: number;
  private reportedAt: number;
  private done = false;

  constructor(
    private readonly onProgress: (progress: UploadProgress) => void,
    private readonly everyMs: number,
    private readonly clock: Clock,
  ) {
    this.startedAt = this.reportedAt = clock.now();
  }

  /** The body's chunks, counted; the clock is looked at once per chunk. */
  async *chunks(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
    for await (const chunk of chunks) {
      this.bytes += chunk.byteLength;
      this.report();
      yield chunk;
    }
  }

  /** The parsed rows, counted as the store takes them. */
  async *rowsOf<R>(rows: AsyncIterable<R>): AsyncGenerator<R> {
    for await (const row of rows) {
      this.rows++;
      yield row;
    }
  }

  /** The upload settled: no call after this one. */
  stop(): void {
    this.done = true;
  }

  private report(): void {
    if (this.done) return;
    const now = this.clock.now();
    if (now - this.reportedAt < this.everyMs) return;
    this.reportedAt = now;
    try {
      this.onProgress({ rows: this.rows, bytes: this.bytes, elapsedMs: now - this.startedAt });
    } catch {
      // A listener's failure is not the upload's.
    }
  }
}
