/**
 * How many requests a process is serving at once, averaged over time: what tells a process whose API is
 * saturated (requests queue in it) from one that merely keeps its event loop busy. Its area under the curve
 * (requests × ms) is kept exact at each change, so a mean over any span costs nothing per request.
 */
export class RequestsInFlight {
  private current = 0;
  private area = 0;
  private changedAt: number;
  private sampledArea = 0;
  private sampledAt: number;

  constructor(private readonly clock: () => number = () => performance.now()) {
    this.changedAt = this.sampledAt = clock();
  }

  enter(): void {
    this.advance();
    this.current++;
  }

  leave(): void {
    this.advance();
    this.current--;
  }

  /** The mean number of requests in flight since the previous call (since construction at the first). */
  meanSinceLastSample(): number {
    this.advance();
    const elapsed = this.changedAt - this.sampledAt;
    const mean = elapsed > 0 ? (this.area - this.sampledArea) / elapsed : this.current;
    this.sampledArea = this.area;
    this.sampledAt = this.changedAt;
    return mean;
  }

  private advance(): void {
    const now = this.clock();
    this.area += this.current * (now - this.changedAt);
    this.changedAt = now;
  }
}
