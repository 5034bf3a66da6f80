/** Where time comes from. Core code never calls Date.now() directly. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}
