import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { GroupCommit, type UnitOutcome } from '../infra/event-store/postgres-append.ts';
import type { StreamAppend } from '../infra/event-store/port.ts';

/**
 * The batching rule of group commit, on a statement runner the test finishes by hand and fake timers it moves:
 * which appends go together and when one more statement may start. The real statement is covered by
 * event-store-append.int.test.ts.
 */
function harness(maxInFlight: number, stalledAfterMs: number) {
  const statements: { streams: string[]; finish(): void }[] = [];
  const commits = new GroupCommit(
    (units) =>
      new Promise<UnitOutcome[]>((resolve) => {
        statements.push({
          streams: units.map((unit) => unit[0]!.stream),
          finish: () => resolve(units.map((unit) => ({ results: unit.map((a) => ({ stream: a.stream, nextExpectedRevision: 0n, position: '0' })) }))),
        });
      }),
    maxInFlight,
    stalledAfterMs,
  );
  const append = (stream: string, events = 1): StreamAppend[] => [
    { stream, events: Array.from({ length: events }, (_, index) => ({ id: `${stream}-id-${index}`, type: 'Happened', data: {} })) },
  ];
  return {
    statements,
    submit: (stream: string, events?: number) => commits.submit(append(stream, events)),
    /** Moves the clock, firing the stall checks due and letting promise callbacks run. */
    advance: (ms: number) => vi.advanceTimersByTimeAsync(ms),
  };
}

describe('group commit', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('runs one statement at a time: an append alone goes at once, the ones that arrive meanwhile go together next', async () => {
    const h = harness(4, 25);
    const first = h.submit('a');
    const rest = [h.submit('b'), h.submit('c'), h.submit('d')];
    expect(h.statements.map((s) => s.streams)).toEqual([['a']]);
    h.statements[0]!.finish();
    await first;
    await h.advance(0);
    expect(h.statements.map((s) => s.streams)).toEqual([['a'], ['b', 'c', 'd']]);
    h.statements[1]!.finish();
    expect((await Promise.all(rest)).map(([result]) => result!.stream)).toEqual(['b', 'c', 'd']);
  });

  it('lets one more statement start beside each one that has run for the stall time, up to the limit', async () => {
    const h = harness(3, 25);
    void h.submit('held'); // waits on a lock held elsewhere, say
    void h.submit('b');
    await h.advance(24);
    expect(h.statements).toHaveLength(1);
    await h.advance(1);
    expect(h.statements.map((s) => s.streams)).toEqual([['held'], ['b']]);
    void h.submit('c');
    void h.submit('d');
    await h.advance(24);
    expect(h.statements).toHaveLength(2); // 'b' has not stalled yet
    await h.advance(1);
    expect(h.statements.map((s) => s.streams)).toEqual([['held'], ['b'], ['c', 'd']]);
    void h.submit('e');
    await h.advance(1000);
    expect(h.statements).toHaveLength(3); // at the limit, however long they run
    h.statements[1]!.finish();
    await h.advance(0);
    expect(h.statements.map((s) => s.streams).at(-1)).toEqual(['e']);
  });

  it('runs statements side by side, up to the limit, while a large unit (a batch of events) waits', async () => {
    const h = harness(3, 25);
    void h.submit('a');
    // A large unit does not wait for the statement running.
    void h.submit('batch-1', 100);
    expect(h.statements.map((s) => s.streams)).toEqual([['a'], ['batch-1']]);
    // A small one does, until a large one waits too: they then go together.
    void h.submit('b');
    expect(h.statements).toHaveLength(2);
    void h.submit('batch-2', 100);
    expect(h.statements.map((s) => s.streams)).toEqual([['a'], ['batch-1'], ['b', 'batch-2']]);
    // At the limit the rest waits for a statement to end, whatever its size.
    void h.submit('batch-3', 100);
    void h.submit('c');
    await h.advance(0);
    expect(h.statements).toHaveLength(3);
    h.statements[0]!.finish();
    await h.advance(0);
    expect(h.statements.map((s) => s.streams).at(-1)).toEqual(['batch-3', 'c']);
    for (const statement of h.statements.slice(1)) statement.finish();
    await h.advance(0);
    // Small units alone go back to one statement at a time.
    void h.submit('d');
    void h.submit('e');
    await h.advance(0);
    expect(h.statements.map((s) => s.streams).slice(4)).toEqual([['d']]);
  });

  it('with a stall time of zero, runs as many statements at once as it may', () => {
    const h = harness(2, 0);
    void h.submit('a');
    void h.submit('b');
    void h.submit('c');
    expect(h.statements.map((s) => s.streams)).toEqual([['a'], ['b']]);
  });
});
