/** How request headers are read: the part of Web `Headers` the core needs, which every adapter supplies. */
export interface HeaderReader {
  /** Case-insensitive; null when absent. Repeated headers are joined with ", ". */
  get(name: string): string | null;
  /**
   * The header names present, lower-case (Web `Headers` has it). Optional:
   * without it the webhook receiver only sees the delivery headers it can
   * name in advance, not every `X-<vendor>-Delivery`.
   */
  keys?(): Iterable<string>;
}
