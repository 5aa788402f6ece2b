/** Counts local subscribers per stream (AnyCable `broker.StreamsTracker`). */
export class StreamsTracker {
  private readonly counts = new Map<string, number>();

  /** Adds a subscriber; true if it is the stream's first. */
  add(stream: string): boolean {
    const count = this.counts.get(stream) ?? 0;
    this.counts.set(stream, count + 1);
    return count === 0;
  }

  /** Whether `stream` has subscribers. */
  has(stream: string): boolean {
    return this.counts.has(stream);
  }

  /** Removes a subscriber; true if it was the stream's last. Unknown streams give false. */
  remove(stream: string): boolean {
    const count = this.counts.get(stream);
    if (count === undefined) return false;
    if (count <= 1) {
      this.counts.delete(stream);
      return true;
    }
    this.counts.set(stream, count - 1);
    return false;
  }
}
