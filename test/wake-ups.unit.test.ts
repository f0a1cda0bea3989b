import { describe, expect, it } from 'vitest';
import { WakeUps } from '../infra/event-store/wake-ups.ts';

describe('WakeUps: when an append statement carries the NOTIFY, and when one goes alone', () => {
  it('lets the first statement carry it, then at most one a interval', () => {
    const wakeUps = new WakeUps(5);
    expect(wakeUps.carry(1000)).not.toBeNull();
    expect(wakeUps.carry(1002)).toBeNull();
    expect(wakeUps.carry(1004)).toBeNull();
    expect(wakeUps.carry(1005)).not.toBeNull();
  });

  it('needs nothing alone after a commit that carried it', () => {
    const wakeUps = new WakeUps(5);
    wakeUps.committed(wakeUps.carry(1000));
    expect(wakeUps.pending).toBe(false);
    expect(wakeUps.next(1000)).toBe('none');
  });

  it('sends one alone for a commit that carried none, once due, covering every commit before it', () => {
    const wakeUps = new WakeUps(5);
    wakeUps.committed(wakeUps.carry(1000));
    wakeUps.committed(wakeUps.carry(1001));
    wakeUps.committed(wakeUps.carry(1002));
    expect(wakeUps.pending).toBe(true);
    expect(wakeUps.next(1003)).toBe(2);
    expect(wakeUps.next(1005)).toBe('send');
    expect(wakeUps.next(1005)).toBe('none');
    // The one sent alone counts for the interval: the next statement carries none until it has passed.
    expect(wakeUps.carry(1007)).toBeNull();
    expect(wakeUps.carry(1010)).not.toBeNull();
  });

  it('lets a statement sent after an uncovered commit carry the NOTIFY for it', () => {
    const wakeUps = new WakeUps(5);
    wakeUps.committed(wakeUps.carry(1000));
    wakeUps.committed(wakeUps.carry(1001));
    expect(wakeUps.pending).toBe(true);
    const later = wakeUps.carry(1006);
    expect(later).not.toBeNull();
    wakeUps.committed(later);
    expect(wakeUps.pending).toBe(false);
    expect(wakeUps.next(1006)).toBe('none');
  });

  it('does not count a NOTIFY carried by a statement sent before an uncovered commit: it may have committed first', () => {
    const wakeUps = new WakeUps(5);
    const early = wakeUps.carry(1000);
    // Another statement, sent without it, commits first and leaves a commit uncovered.
    wakeUps.committed(null);
    wakeUps.committed(early);
    expect(wakeUps.pending).toBe(true);
    expect(wakeUps.next(1005)).toBe('send');
  });

  it('keeps the commit uncovered when the statement that carried the NOTIFY failed', () => {
    const wakeUps = new WakeUps(5);
    wakeUps.committed(null);
    // Taken, but its statement never committed: nothing to report, the pending commit still waits.
    expect(wakeUps.carry(1000)).not.toBeNull();
    expect(wakeUps.pending).toBe(true);
    expect(wakeUps.next(1001)).toBe(4);
    expect(wakeUps.next(1005)).toBe('send');
  });

  it('with no interval, lets every statement carry it', () => {
    const wakeUps = new WakeUps(0);
    for (let n = 0; n < 5; n++) {
      const carried = wakeUps.carry(1000);
      expect(carried).not.toBeNull();
      wakeUps.committed(carried);
    }
    expect(wakeUps.pending).toBe(false);
  });
});
