import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobHandlers } from '../command-api/jobs.ts';
import { GIVEAWAY_DRAW_JOB, WINDOW_CLOSE_JOB } from '../domain/jobs.ts';
import { ManualClock } from './support/clock.ts';
import { asTenant, startTestService, type Tenant, type TestService } from './support/service.ts';

const images = { primaryImageUrl: '', secondaryImageUrl: '' };
const block = (title: string) => ({ title, description: title, light: images, dark: images });

/**
 * Supply and timed work under pressure: concurrent completions against a small allocation, and the
 * window-close and draw jobs run twice, raced, and killed after their effect but before they were marked
 * done. Each pays and draws exactly once.
 */
describe('engagement exactly once', () => {
  const clock = new ManualClock('2027-06-01T08:00:00Z');
  let t: TestService;
  let acme: Tenant;
  let communityId: string;
  let allocationId: string;
  let leaderboardId: string;
  let giveawayId: string;
  const post = async (path: string, body: unknown) => {
    const response = await t.request('POST', `/api/v2/admin${path}`, { ...asTenant(acme), body });
    expect([200, 201], `${path}: ${JSON.stringify(response.body)}`).toContain(response.status);
    return response.body;
  };
  const countOf = async (type: string) =>
    Number((await sql<{ count: string }>`select count(*) as count from es_events where event_type = ${type}`.execute(t.service.database.db)).rows[0]!.count);
  const dataOf = async <Data>(type: string) =>
    (await sql<{ data: Data }>`select data from es_events where event_type = ${type} order by global_position`.execute(t.service.database.db)).rows.map(
      (row) => row.data,
    );
  const jobRow = (id: string) => t.service.database.db.selectFrom('scheduled_jobs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

  beforeAll(async () => {
    t = await startTestService({ clock, jobs: false, env: { SETTLEMENT_DELAY_SECONDS: '0' } });
    acme = await t.createOrganisation('supply');
    communityId = (await post('/communities', { name: 'Everyone' })).id;
    const rewardId = (await post('/rewards', { kind: 'asset', communityId, details: { en: block('Mug') }, redeemable: {}, codes: null, expiresAt: null })).id;
    allocationId = (await post(`/rewards/${rewardId}/allocations`, { supply: 50, amountToDistribute: 1 })).id;
    giveawayId = (await post('/rewards', { kind: 'entries', communityId, details: { en: block('Trip') }, drawsAt: '2027-06-02T00:00:00Z', supply: 3 })).id;
    const entries = (await post(`/rewards/${giveawayId}/allocations`, { supply: 1000, amountToDistribute: 1 })).id;
    await post('/challenges', {
      communityId,
      details: { en: block('Say hello') },
      actions: [
        {
          key: 'hello',
          category: 'participation',
          criteria: [],
          xp: 1,
          isSkippable: false,
          details: { en: block('Hello') },
          distribution: {
            pointsToDistribute: 0,
            bonusXpToDistribute: 0,
            rewardsConfig: {
              amountToDistribute: 2,
              allocations: [
                { id: allocationId, rewardId, supply: 50, amountToDistribute: 1 },
                { id: entries, rewardId: giveawayId, supply: 1000, amountToDistribute: 1 },
              ],
            },
          },
        },
      ],
      isLinear: false,
      maxCompletionsPerPeriod: 1,
      period: 'open',
      startsAt: '2027-06-01T00:00:00Z',
      expiresAt: '2027-07-01T00:00:00Z',
      rewardDistribution: { points: 0, xp: 0, rewardAllocations: [], numberOfRewardsToReceive: 0 },
    });
    leaderboardId = (await post('/leaderboards', { name: 'Hellos', metricType: 'total-xp', period: 'daily', startsAt: '2027-06-01T00:00:00Z', status: 'live' }))
      .id;
    await post(`/leaderboards/${leaderboardId}/distribution`, {
      rewards: [{ startRank: 1, endRank: 10, pointsToDistribute: 7, bonusXpToDistribute: 0, rewardsConfig: { amountToDistribute: 0, allocations: [] } }],
    });
  }, 60_000);
  afterAll(async () => {
    await t.close();
  });

  it('200 concurrent completions against an allocation of supply 50 distribute exactly 50', async () => {
    const responses = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        t.request('POST', '/api/v2/admin/events/custom', {
          ...asTenant(acme),
          body: { eventName: 'hello', userId: `fan-${i}`, communityId, autoCreateUser: true, payload: {} },
        }),
      ),
    );
    expect(responses.map((response) => response.status)).toEqual(Array(200).fill(200));
    await t.settle();
    const handOuts = (await t.service.store.readStream(`allocation-${allocationId}`)).filter((event) => event.type === 'AllocationDistributed');
    expect(handOuts).toHaveLength(50);
    expect(handOuts.map((event) => (event.data as { firstUnit: number }).firstUnit)).toEqual(Array.from({ length: 50 }, (_, unit) => unit));
    expect(new Set(handOuts.map((event) => (event.data as { userId: string }).userId)).size).toBe(50);
    expect(await countOf('RewardAssetGranted')).toBe(50);
    expect(await countOf('ActionCompleted')).toBe(200);
    const allocation = await t.service.database.db.selectFrom('reward_allocations').selectAll().where('id', '=', allocationId).executeTakeFirstOrThrow();
    expect(allocation.distributed).toBe(50);
  });

  it('a window close run twice, raced, and killed after its effect closes and pays once', async () => {
    clock.set('2027-06-02T00:00:00Z');
    await t.settle();
    const jobId = `${WINDOW_CLOSE_JOB}:${leaderboardId}:${Date.parse('2027-06-01T00:00:00Z')}`;
    const row = await jobRow(jobId);
    const handle = jobHandlers(t.service)[WINDOW_CLOSE_JOB]!;
    // A worker claims the job, does its work, and dies before marking it done...
    await t.service.database.db
      .updateTable('scheduled_jobs')
      .set({ locked_until: new Date(clock.now().getTime() + 300_000).toISOString() })
      .where('id', '=', jobId)
      .execute();
    await handle(row.payload, { jobId, attempt: 1 });
    // ...while two more copies run at once.
    await Promise.all([handle(row.payload, { jobId, attempt: 1 }), handle(row.payload, { jobId, attempt: 1 })]);
    await t.settle();
    expect(await countOf('LeaderboardWindowClosed')).toBe(1);
    // The claim lapses; the job runs again, finds the window closed, and is marked done.
    clock.advance(301_000);
    await t.service.jobs.runDue();
    await t.settle();
    expect((await jobRow(jobId)).status).toBe('done');
    expect(await countOf('LeaderboardWindowClosed')).toBe(1);
    // Ten ranks rewarded (all 200 tie on 1 XP; the earliest ten win), seven points each, once.
    const paid = await dataOf<{ amount: number; source: { rank: number } }>('PointsEarned');
    expect(paid.map((points) => [points.source.rank, points.amount])).toEqual(Array.from({ length: 10 }, (_, i) => [i + 1, 7]));
  });

  it('a draw run twice, raced, and killed after its effect draws once', async () => {
    await t.settle();
    const jobId = `${GIVEAWAY_DRAW_JOB}:${giveawayId}:${Date.parse('2027-06-02T00:00:00Z')}`;
    const row = await jobRow(jobId);
    const handle = jobHandlers(t.service)[GIVEAWAY_DRAW_JOB]!;
    await handle(row.payload, { jobId, attempt: 1 });
    await Promise.all([handle(row.payload, { jobId, attempt: 2 }), handle(row.payload, { jobId, attempt: 2 })]);
    await t.service.jobs.runDue();
    await t.settle();
    expect((await jobRow(jobId)).status).toBe('done');
    const draws = (await t.service.store.readStream(`reward-${giveawayId}`)).filter((event) => event.type === 'GiveawayDrawn');
    expect(draws).toHaveLength(1);
    const winners = (draws[0]!.data as { winners: { userId: string }[] }).winners;
    expect(winners).toHaveLength(3);
    const granted = (await dataOf<{ rewardId: string; userId: string }>('RewardAssetGranted')).filter((grant) => grant.rewardId === giveawayId);
    expect(granted.map((grant) => grant.userId).sort()).toEqual(winners.map((winner) => winner.userId).sort());
  });
});
