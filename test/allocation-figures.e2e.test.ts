import type { RewardAllocation } from '../domain/allocation.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from './support/clock.ts';
import { adminOf, block } from './support/programme.ts';
import { asTenant, startTestService, type Tenant, type TestService } from './support/service.ts';

type AllocationView = RewardAllocation;

/**
 * Issue 12, defect 4: the figures of an allocation follow the engine's hand-outs, wherever the allocation
 * was created (by `POST /rewards/{id}/allocations`, or inline by an action's, a leaderboard's or a game's
 * distribution), and a reward lists every allocation of it. Six users complete an action whose inline
 * allocation holds 5; a second action hands out an allocation created by the endpoint (2 units) to three
 * users; a leaderboard pays rank 1..2 from an allocation of 1 when the week closes.
 */
describe('allocation figures follow the hand-outs', () => {
  let t: TestService;
  let acme: Tenant;
  let rewardId: string;
  let challengeId: string;
  let leaderboardId: string;
  let gameId: string;
  let gameAllocationId: string;
  let endpointAllocationId: string;
  const get = async (path: string) => {
    const response = await t.request('GET', `/api/v2/admin${path}`, asTenant(acme));
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    return response.body;
  };

  beforeAll(async () => {
    const clock = new ManualClock('2027-02-28T12:00:00Z');
    t = await startTestService({ clock, jobs: false, env: { SETTLEMENT_DELAY_SECONDS: '60' } });
    acme = await t.createOrganisation('acme');
    const admin = adminOf(t, acme);
    const community = await admin.community('Coffee club');
    const users = [];
    for (let i = 1; i <= 6; i++) users.push(await admin.user(`ext-${i}`, [community]));
    rewardId = (await admin.post('/rewards', { kind: 'asset', communityId: community, details: { en: block('Free coffee') } })).id as string;
    endpointAllocationId = (await admin.post(`/rewards/${rewardId}/allocations`, { supply: 2, amountToDistribute: 1 })).id as string;
    const paying = (allocation: Record<string, unknown>) => ({
      pointsToDistribute: 1,
      bonusXpToDistribute: 0,
      rewardsConfig: { amountToDistribute: 1, allocations: [{ rewardId, amountToDistribute: 1, ...allocation }] },
    });
    const action = (key: string, distribution: unknown) => ({ key, category: 'loyalty', xp: 1, details: { en: block(key) }, distribution });
    challengeId = (
      await admin.post('/challenges', {
        communityId: community,
        details: { en: block('Coffee week') },
        actions: [action('visit', paying({ supply: 5 })), action('share', paying({ id: endpointAllocationId, supply: 2 }))],
        maxCompletionsPerPeriod: 1,
        period: 'daily',
        startsAt: '2027-03-01T00:00:00Z',
        expiresAt: '2027-04-01T00:00:00Z',
      })
    ).id as string;
    leaderboardId = (
      await admin.post('/leaderboards', {
        name: 'Busiest',
        metricType: 'total-actions-completed',
        period: 'weekly',
        startsAt: '2027-03-01T00:00:00Z',
        expiresAt: '2027-03-15T00:00:00Z',
        status: 'scheduled',
        conditions: [],
      })
    ).id as string;
    await admin.post(`/leaderboards/${leaderboardId}/distribution`, { rewards: [{ startRank: 1, endRank: 2, ...paying({ supply: 1 }) }] });
    gameId = (await admin.post('/games', { name: 'Spin', type: 'spin-the-wheel', details: { en: block('Spin') } })).id as string;
    const game = await admin.post(`/games/${gameId}/distribution`, { distributions: [paying({ supply: 3 })] });
    gameAllocationId = game.distributions[0].rewardsConfig.allocations[0].id as string;

    const runJobsAt = async (at: string) => {
      clock.set(at);
      await t.settle();
      await t.service.jobs.runDue();
      await t.settle();
    };
    await runJobsAt('2027-03-01T00:00:00Z'); // the leaderboard goes live
    for (const [i, user] of users.entries()) {
      clock.set(`2027-03-02T09:0${i}:00Z`);
      await admin.post('/events/custom', { eventName: 'visit', userId: user.id, communityId: community, payload: {} });
      if (i < 3) await admin.post('/events/custom', { eventName: 'share', userId: user.id, communityId: community, payload: {} });
    }
    await runJobsAt('2027-03-08T00:01:00Z'); // the week closes and its rank rewards are paid
  }, 120_000);
  afterAll(async () => {
    await t.close();
  });

  it('hands out the supplies and no more (the event log)', async () => {
    const page = await t.service.store.readAll({ filter: { eventTypes: ['AllocationDistributed'] } });
    const handedOut = new Map<string, number>();
    for (const event of page.events) {
      const { allocationId, amount } = event.data as { allocationId: string; amount: number };
      handedOut.set(allocationId, (handedOut.get(allocationId) ?? 0) + amount);
    }
    expect([...handedOut.values()].sort()).toEqual([1, 2, 5]);
    expect(handedOut.get(endpointAllocationId)).toBe(2);
  });

  it('shows each action allocation as handed out: distributed equals supply, and it is no longer live', async () => {
    const challenge = await get(`/challenges/${challengeId}`);
    const [visit, share] = (challenge.actions as { distribution: { rewardsConfig: { allocations: AllocationView[] } } }[]).map(
      (a) => a.distribution.rewardsConfig.allocations[0]!,
    );
    expect(visit).toMatchObject({ supply: 5, distributed: 5, isLive: false });
    expect(share).toEqual({ id: endpointAllocationId, rewardId, supply: 2, amountToDistribute: 1, distributed: 2, isLive: false });
  });

  it('shows the leaderboard’s rank allocation as handed out', async () => {
    const distribution = await get(`/leaderboards/${leaderboardId}/distribution`);
    expect(distribution.rewards[0].rewardsConfig.allocations[0]).toMatchObject({ supply: 1, distributed: 1, isLive: false });
  });

  it('lists every allocation of the reward, wherever it was created, with its figures', async () => {
    const listed = await get(`/rewards/${rewardId}/allocations?limit=100`);
    expect(listed.totalCount).toBe(4);
    const figures = (listed.edges as AllocationView[]).map(({ supply, distributed, isLive }) => ({ supply, distributed, isLive }));
    expect(figures).toEqual(
      expect.arrayContaining([
        { supply: 5, distributed: 5, isLive: false },
        { supply: 2, distributed: 2, isLive: false },
        { supply: 1, distributed: 1, isLive: false },
        { supply: 3, distributed: 0, isLive: true },
      ]),
    );
    expect((listed.edges as AllocationView[]).map((allocation) => allocation.id)).toContain(gameAllocationId);
    // A game's prizes are not handed out by the engine: its allocation is listed, untouched.
    const game = await get(`/games/${gameId}`);
    expect(game.distributions[0].rewardsConfig.allocations[0]).toMatchObject({ id: gameAllocationId, supply: 3, distributed: 0, isLive: true });
  });
});
