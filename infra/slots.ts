/**
 * At most `size` pieces of work at once; the others wait their turn, first come first served. A slot is
 * handed straight to the next waiter when one ends, so a late arrival cannot overtake the queue.
 */
export class Slots {
  private free: number;
  private readonly waiting: (() => void)[] = [];

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new Error(`Slots: size must be a positive integer, got ${size}`);
    this.free = size;
  }

  /** How many wait for a slot now. */
  get queued(): number {
    return this.waiting.length;
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.free > 0) this.free--;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    }
  }
}
