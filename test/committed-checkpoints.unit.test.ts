import { describe, expect, it } from 'vitest';
import { CommittedCheckpoints } from '../projectors/runtime/committed-checkpoints.ts';

const at = (n: number) => n.toString(16).padStart(32, '0');

/** A pause and whether it has ended; reports wake a pause synchronously, so this is known right after one. */
function paused(checkpoints: CommittedCheckpoints, names: string[], position: string, ms = 60_000) {
  const state = { ended: false };
  const ending = checkpoints.pause(names, position, ms).then(() => void (state.ended = true));
  return { state, ending };
}

describe('checkpoints committed in this process', () => {
  it('end a pause once every read model waited for is reported at or past the position, not before', async () => {
    const checkpoints = new CommittedCheckpoints();
    const { state, ending } = paused(checkpoints, ['users', 'communities'], at(10));
    checkpoints.report('users', at(12));
    checkpoints.report('communities', at(9));
    checkpoints.report('leaderboards', at(20));
    await Promise.resolve();
    expect(state.ended).toBe(false);
    checkpoints.report('communities', at(10));
    await ending;
    expect(state.ended).toBe(true);
  });

  it('keep the furthest checkpoint of each read model: a generation behind it changes nothing', () => {
    const checkpoints = new CommittedCheckpoints();
    checkpoints.report('users', at(30));
    checkpoints.report('users', at(5));
    checkpoints.report('users', null);
    expect(checkpoints.passed(['users'], at(30))).toBe(true);
    expect(checkpoints.passed(['users'], at(31))).toBe(false);
    expect(checkpoints.passed(['users', 'communities'], at(1))).toBe(false);
  });

  it('do not wake a pause that began when the reports had already passed (the rows said otherwise): it sleeps its time', async () => {
    const checkpoints = new CommittedCheckpoints();
    checkpoints.report('users', at(10));
    const { state, ending } = paused(checkpoints, ['users'], at(10), 20);
    checkpoints.report('users', at(11));
    await Promise.resolve();
    expect(state.ended).toBe(false);
    await ending;
    expect(state.ended).toBe(true);
  });

  it('tell which read models runners of this process commit now: every one named reported a checkpoint within the time given', () => {
    let clock = 1_000;
    const checkpoints = new CommittedCheckpoints(() => clock);
    expect(checkpoints.reporting(['users'], 1000)).toBe(false);
    checkpoints.report('users', at(3));
    checkpoints.report('communities', null);
    expect(checkpoints.reporting(['users'], 1000)).toBe(true);
    expect(checkpoints.reporting(['users', 'communities'], 1000)).toBe(false);
    clock += 600;
    checkpoints.report('communities', at(1));
    // A commit that does not move a read model further still says its runner runs here.
    checkpoints.report('users', at(2));
    clock += 900;
    expect(checkpoints.reporting(['users', 'communities'], 1000)).toBe(true);
    checkpoints.report('communities', at(1));
    clock += 200;
    expect(checkpoints.reporting(['users', 'communities'], 1000)).toBe(false);
    expect(checkpoints.reporting(['communities'], 1000)).toBe(true);
    expect(checkpoints.passed(['users'], at(3))).toBe(true);
  });
});
