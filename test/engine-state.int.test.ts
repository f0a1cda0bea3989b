import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChallengeRecord } from '../domain/challenge.ts';
import { withTableTypes } from '../infra/database.ts';
import { engagementEngine } from '../process-managers/engagement-engine/index.ts';
import { loadChallengesAndMembers, loadCommunityChallenges, loadMembers, type EngineState } from '../process-managers/engagement-engine/state.ts';
import { schemaOf } from '../projectors/runtime/index.ts';
import type { TestDatabase } from './support/databases.ts';
import { preparedDatabase } from './support/projections.ts';

describe("the engine's state", () => {
  let test: TestDatabase;

  beforeAll(async () => {
    test = await preparedDatabase([engagementEngine]);
  });
  afterAll(() => test.drop());

  it('reads challenges and members in one query as it reads them apart', async () => {
    const db = withTableTypes<EngineState>(test.database.db.withSchema(schemaOf(engagementEngine.name, 1)));
    // Records as the engine stores them; what they hold does not matter to the read.
    const record = (id: string, communityId: string) => ({ challengeId: id, communityId, name: `challenge ${id}`, actions: [] }) as unknown as ChallengeRecord;
    await db
      .insertInto('engine_challenges')
      .values(
        [
          ['b', 'c1'],
          ['a', 'c1'],
          ['c', 'c2'],
          ['d', 'c3'],
        ].map(([id, communityId]) => ({ id: id!, community_id: communityId!, record: JSON.stringify(record(id!, communityId!)) })),
      )
      .execute();
    await db
      .insertInto('engine_members')
      .values([
        {
          user_id: 'u1',
          community_id: 'c1',
          streak: JSON.stringify({ lastDay: "2026-12-01 it's", current: 3, longest: 5 }),
          last_active_at: '2026-12-01T10:00:00.123Z',
        },
        {
          user_id: 'u2',
          community_id: 'c2',
          streak: JSON.stringify({ lastDay: null, current: 0, longest: 1 }),
          last_active_at: '2026-12-02T23:59:59.999+02:00',
        },
      ])
      .execute();
    const communities = ['c1', 'c2', 'c4'];
    const pairs: [string, string][] = [
      ['u1', 'c1'],
      ['u2', 'c2'],
      ['u3', 'c1'],
    ];
    const together = await loadChallengesAndMembers(db, communities, pairs);
    expect(together.challenges).toEqual(await loadCommunityChallenges(db, communities));
    expect(together.members).toEqual(await loadMembers(db, pairs));
    expect([...together.challenges.get('c1')!].map((challenge) => challenge.challengeId)).toEqual(['a', 'b']);
    expect(together.challenges.get('c4')).toEqual([]);
    expect(together.members.get('u2 c2')).toEqual({ streak: { lastDay: null, current: 0, longest: 1 }, lastActiveAt: '2026-12-02T21:59:59.999Z' });
    expect(together.members.has('u3 c1')).toBe(false);
  });
});
