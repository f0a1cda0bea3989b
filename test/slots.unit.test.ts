import { describe, expect, it } from 'vitest';
import { Slots } from '../infra/slots.ts';

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((done) => (resolve = done));
  return { promise, resolve };
}

describe('Slots', () => {
  it('runs at most its size at once, the others in the order they came', async () => {
    const slots = new Slots(2);
    const gates = [deferred(), deferred(), deferred(), deferred()];
    const started: number[] = [];
    let running = 0;
    let most = 0;
    const runs = gates.map((gate, index) =>
      slots.run(async () => {
        started.push(index);
        most = Math.max(most, ++running);
        await gate.promise;
        running--;
        return index;
      }),
    );
    await new Promise((resolve) => setImmediate(resolve));
    expect(started).toEqual([0, 1]);
    expect(slots.queued).toBe(2);
    gates[1]!.resolve();
    await runs[1];
    await new Promise((resolve) => setImmediate(resolve));
    expect(started).toEqual([0, 1, 2]);
    for (const gate of gates) gate.resolve();
    expect(await Promise.all(runs)).toEqual([0, 1, 2, 3]);
    expect(started).toEqual([0, 1, 2, 3]);
    expect(most).toBe(2);
    expect(slots.queued).toBe(0);
  });

  it('frees the slot of work that failed', async () => {
    const slots = new Slots(1);
    await expect(slots.run(() => Promise.reject(new Error('failed')))).rejects.toThrow('failed');
    expect(await slots.run(() => Promise.resolve('next'))).toBe('next');
  });

  it('refuses a size that is not a positive whole number', () => {
    expect(() => new Slots(0)).toThrow();
    expect(() => new Slots(1.5)).toThrow();
  });
});
