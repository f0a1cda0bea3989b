import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drawWinners } from '../domain/draw.ts';
import type { GiveawayDrawnEvent, RewardAssetGrant } from '../domain/engagement-events.ts';
import { assetIdOf } from '../process-managers/engagement-engine/index.ts';
import { ManualClock } from './support/clock.ts';
import { asTenant, startTestService, type Tenant, type TestService } from './support/service.ts';

/**
 * One programme run end to end through the HTTP API on a clock the test moves: an organisation in
 * Europe/Paris, a community, a linear daily challenge of three actions, a weekly total-XP leaderboard with
 * rank rewards, an asset reward with two codes and a giveaway. Every figure asserted below is derived by
 * hand in the comments from the script.
 */
const images = { primaryImageUrl: '', secondaryImageUrl: '' };
const block = (title: string) => ({ title, description: title, light: images, dark: images });

describe('an engagement programme, end to end', () => {
  const clock = new ManualClock('2027-02-28T12:00:00Z');
  let t: TestService;
  let acme: Tenant;
  let communityId: string;
  let leaderboardId: string;
  let assetRewardId: string;
  let giveawayId: string;
  let linkUrl: string;
  let codeAllocation: string;
  let entryAllocation: string;
  const users: Record<'u1' | 'u2' | 'u3', string> = { u1: '', u2: '', u3: '' };
  const as = () => asTenant(acme);
  const post = async (path: string, body: unknown, expected = [200, 201]) => {
    const response = await t.request('POST', `/api/v2/admin${path}`, { ...as(), body });
    expect(expected, `${path}: ${JSON.stringify(response.body)}`).toContain(response.status);
    return response.body;
  };
  const logAt = async (at: string, user: keyof typeof users, eventName: string, payload: Record<string, unknown> = {}) => {
    clock.set(at);
    await post('/events/custom', { eventName, userId: users[user], communityId, payload });
  };
  const member = async (user: keyof typeof users) => {
    const response = await t.request('GET', `/api/v2/admin/users/${users[user]}`, as());
    expect(response.status).toBe(200);
    return response.body;
  };
  const userToken = async (user: keyof typeof users) => (await post(`/users/${users[user]}/tokens`, {})).token as string;
  const standings = async (window: string, extra: Record<string, string> = {}, query = '') =>
    t.request('GET', `/api/v2/integration/leaderboards/${leaderboardId}/standings?window=${window}${query}`, asTenant(acme, extra));
  const runJobsAt = async (at: string) => {
    clock.set(at);
    await t.settle();
    await t.service.jobs.runDue();
    await t.settle();
  };

  beforeAll(async () => {
    t = await startTestService({ clock, jobs: false, env: { SETTLEMENT_DELAY_SECONDS: '60' } });
    acme = await t.createOrganisation('programme');
    await t.request('PATCH', '/api/v2/admin/settings', { ...as(), body: { timezone: 'Europe/Paris' } });
    communityId = (await post('/communities', { name: 'Coffee club' })).id;
    for (const user of ['u1', 'u2', 'u3'] as const) {
      users[user] = (await post('/users', { externalUserId: `ext-${user}`, displayName: user.toUpperCase(), communityIds: [communityId] })).id;
    }
    assetRewardId = (
      await post('/rewards', {
        kind: 'asset',
        communityId,
        details: { en: block('Free coffee') },
        redeemable: { redeemByDate: '2027-12-31T00:00:00Z' },
        codes: ['CODE-1', 'CODE-2'],
        expiresAt: null,
      })
    ).id;
    codeAllocation = (await post(`/rewards/${assetRewardId}/allocations`, { supply: 2, amountToDistribute: 1 })).id;
    giveawayId = (await post('/rewards', { kind: 'entries', communityId, details: { en: block('Trip') }, drawsAt: '2027-03-05T12:00:00Z', supply: 1 })).id;
    entryAllocation = (await post(`/rewards/${giveawayId}/allocations`, { supply: 100, amountToDistribute: 1 })).id;
    await post('/challenges', {
      communityId,
      details: { en: block('Coffee week') },
      actions: [
        {
          key: 'visit',
          category: 'participation',
          criteria: [],
          xp: 10,
          isSkippable: false,
          details: { en: block('Visit') },
          distribution: {
            pointsToDistribute: 5,
            bonusXpToDistribute: 0,
            rewardsConfig: { amountToDistribute: 1, allocations: [{ id: entryAllocation, rewardId: giveawayId, supply: 100, amountToDistribute: 1 }] },
          },
        },
        {
          key: 'purchase',
          category: 'loyalty',
          criteria: [{ field: 'total', operator: 'gte', value: 10 }],
          xp: 20,
          isSkippable: false,
          details: { en: block('Buy') },
          distribution: { pointsToDistribute: 10, bonusXpToDistribute: 0, rewardsConfig: { amountToDistribute: 0, allocations: [] } },
        },
        { key: 'review', category: 'creativity', criteria: [], xp: 30, isSkippable: true, details: { en: block('Review') } },
      ],
      isLinear: true,
      maxCompletionsPerPeriod: 1,
      period: 'daily',
      startsAt: '2027-03-01T00:00:00Z',
      expiresAt: '2027-04-01T00:00:00Z',
      rewardDistribution: {
        points: 50,
        xp: 15,
        rewardAllocations: [{ rewardId: assetRewardId, allocationId: codeAllocation, amountToDistribute: 1 }],
        numberOfRewardsToReceive: 1,
      },
    });
    leaderboardId = (
      await post('/leaderboards', {
        name: 'Coffee champions',
        metricType: 'total-xp',
        period: 'weekly',
        startsAt: '2027-03-01T00:00:00Z',
        expiresAt: '2027-03-14T23:00:00Z',
        status: 'scheduled',
        conditions: [{ type: 'community', communityId }],
      })
    ).id;
    await post(`/leaderboards/${leaderboardId}/distribution`, {
      rewards: [
        { startRank: 1, endRank: 1, pointsToDistribute: 100, bonusXpToDistribute: 40, rewardsConfig: { amountToDistribute: 0, allocations: [] } },
        { startRank: 2, endRank: 2, pointsToDistribute: 50, bonusXpToDistribute: 0, rewardsConfig: { amountToDistribute: 0, allocations: [] } },
      ],
    });

    linkUrl = (await post('/events/custom/link', { eventName: 'visit', communityId, payload: {}, expiryTime: 86_400, isSingleUse: false })).url;
    await runJobsAt('2027-03-01T00:00:00Z'); // startsAt: scheduled → live

    // Tuesday: u1 visits (+10 XP, +5 pts, 1 entry), misses the purchase criteria, then buys (+20 XP, +10 pts)
    // and so completes the challenge (+15 XP, +50 pts, CODE-1); a fourth attempt the same day hits the daily limit.
    await logAt('2027-03-02T09:00:00Z', 'u1', 'visit');
    await logAt('2027-03-02T09:05:00Z', 'u1', 'purchase', { total: 5 });
    await logAt('2027-03-02T09:10:00Z', 'u1', 'purchase', { total: 20 });
    await logAt('2027-03-02T09:15:00Z', 'u1', 'visit');
    // Wednesday: u2 buys first (out of order in a linear challenge), visits, buys: 45 XP like u1 had, later.
    await logAt('2027-03-03T10:00:00Z', 'u2', 'purchase', { total: 50 });
    await logAt('2027-03-03T10:05:00Z', 'u2', 'visit');
    await logAt('2027-03-03T10:10:00Z', 'u2', 'purchase', { total: 50 });
    // u1 starts a second run on a new day: +10 XP (55), +5 pts, a second entry, a two-day streak.
    await logAt('2027-03-03T12:00:00Z', 'u1', 'visit');
    // Thursday: u3 completes too (45 XP, reached last); the code allocation is empty now; the skippable review hits the limit.
    await logAt('2027-03-04T11:00:00Z', 'u3', 'visit');
    await logAt('2027-03-04T11:05:00Z', 'u3', 'purchase', { total: 15 });
    await logAt('2027-03-04T11:10:00Z', 'u3', 'review');
    await t.settle();
  }, 60_000);
  afterAll(async () => {
    await t.close();
  });

  it('went live at startsAt', async () => {
    const response = await t.request('GET', `/api/v2/admin/leaderboards/${leaderboardId}`, as());
    expect(response.body.status).toBe('live');
  });

  it('ranks the live week by XP, ties broken by who got there first, with the signed-in user outside the page', async () => {
    clock.set('2027-03-04T18:00:00Z');
    const response = await standings('current', { authorization: `Bearer ${await userToken('u3')}` }, '&limit=1');
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    expect(response.body.window).toEqual({ start: '2027-03-01T00:00:00.000Z', end: '2027-03-07T23:00:00.000Z', status: 'open' });
    expect(response.body.totalCount).toBe(3);
    expect(response.body.edges).toEqual([
      expect.objectContaining({ rank: 1, userId: users.u1, score: 55, reachedAt: '2027-03-03T12:00:00.000Z', displayName: 'U1' }),
    ]);
    expect(response.body.me).toEqual(expect.objectContaining({ rank: 3, userId: users.u3, score: 45, reachedAt: '2027-03-04T11:05:00.000Z' }));
    const second = await standings('current', {}, '&limit=1&skip=1');
    expect(second.body.edges).toEqual([expect.objectContaining({ rank: 2, userId: users.u2, score: 45, reachedAt: '2027-03-03T10:10:00.000Z' })]);
    expect(second.body.me).toBeNull();
  });

  it('draws the giveaway once at drawsAt, weighted by the entries earned, and gives the winner an asset', async () => {
    await runJobsAt('2027-03-05T12:00:30Z'); // inside the settlement delay: not yet
    expect((await t.service.store.readStream(`reward-${giveawayId}`)).map((event) => event.type)).not.toContain('GiveawayDrawn');
    await runJobsAt('2027-03-05T12:01:00Z');
    await runJobsAt('2027-03-05T12:02:00Z');
    const drawn = (await t.service.store.readStream(`reward-${giveawayId}`)).filter((event) => event.type === 'GiveawayDrawn');
    expect(drawn).toHaveLength(1);
    const draw = drawn[0]!.data as GiveawayDrawnEvent['data'];
    // Entries: u1 visited twice, u2 and u3 once each.
    const expected = [
      { userId: users.u1, entries: 2 },
      { userId: users.u2, entries: 1 },
      { userId: users.u3, entries: 1 },
    ].sort((a, b) => (a.userId < b.userId ? -1 : 1));
    expect(draw.entrants).toEqual(expected);
    const winners = drawWinners(expected, 1, draw.seed);
    expect(draw.winners.map((winner) => winner.userId)).toEqual(winners);
    const [asset] = await t.service.store.readStream(`rewardasset-${draw.winners[0]!.assetId}`);
    expect(asset?.data).toEqual(expect.objectContaining({ userId: winners[0], rewardId: giveawayId, allocationId: null }));
  });

  it('closes the week after the settlement delay, freezes it and pays each rank reward once', async () => {
    await runJobsAt('2027-03-07T23:00:30Z');
    const settling = await standings('previous');
    expect(settling.body.window.status).toBe('settling'); // week one has ended; late events may still count
    await runJobsAt('2027-03-07T23:01:00Z');
    await runJobsAt('2027-03-07T23:05:00Z'); // again: nothing more
    const frozen = await standings('previous');
    expect(frozen.status, JSON.stringify(frozen.body)).toBe(200);
    expect(frozen.body.window.status).toBe('closed');
    expect(frozen.body.edges.map((s: { userId: string; rank: number; score: number }) => [s.rank, s.userId, s.score])).toEqual([
      [1, users.u1, 55],
      [2, users.u2, 45],
      [3, users.u3, 45],
    ]);
    const byDate = await standings('2027-03-03');
    expect(byDate.body.edges).toEqual(frozen.body.edges);
    // Leaderboard pay-outs never count towards total-xp: the new week is empty.
    expect((await standings('current')).body.totalCount).toBe(0);
  });

  it('keeps every user’s ledgers and streaks as derived by hand', async () => {
    const community = (body: { communityData: { communityId: string; streak: { currentStreak: number } }[] }) =>
      body.communityData.find((data) => data.communityId === communityId);
    const u1 = await member('u1');
    // Points: 5 + 10 + 50 + 5 + 100 (rank 1). XP: participation 10 + 10 + 15 + 40 (rank 1), loyalty 20.
    expect(u1.points).toBe(170);
    expect(u1.xp).toEqual({ total: 95, knowledge: 0, creativity: 0, loyalty: 20, influence: 0, participation: 75, contribution: 0 });
    expect(community(u1)).toEqual(
      expect.objectContaining({
        points: 170,
        challengesCompleted: 1,
        streak: { currentStreak: 2, longestStreak: 2, lastExtendedAt: '2027-03-03T12:00:00.000Z' },
      }),
    );
    const u2 = await member('u2');
    expect(u2.points).toBe(115); // 5 + 10 + 50 + 50 (rank 2)
    expect(u2.xp.total).toBe(45);
    const u3 = await member('u3');
    expect(u3.points).toBe(65);
    expect(u3.xp).toEqual({ total: 45, knowledge: 0, creativity: 0, loyalty: 20, influence: 0, participation: 25, contribution: 0 });
    expect(community(u3)?.streak.currentStreak).toBe(1);
  });

  it('hands out each code once, in order, and never more than the allocation holds', async () => {
    const grant = async (unit: number) =>
      (await t.service.store.readStream(`rewardasset-${assetIdOf(codeAllocation, unit)}`))[0]?.data as RewardAssetGrant | undefined;
    expect(await grant(0)).toEqual(expect.objectContaining({ userId: users.u1, code: 'CODE-1', rewardId: assetRewardId }));
    expect(await grant(1)).toEqual(expect.objectContaining({ userId: users.u2, code: 'CODE-2' }));
    expect(await grant(2)).toBeUndefined();
    const allocations = await t.request('GET', `/api/v2/admin/rewards/${assetRewardId}/allocations`, as());
    expect(allocations.body.edges).toEqual([expect.objectContaining({ id: codeAllocation, supply: 2, distributed: 2, isLive: false })]);
  });

  it('records every attempt with its outcome', async () => {
    const attempts = await sql<{ data: { userId: string; actionKey: string; outcome: string } }>`
      select data from es_events where event_type = 'ActionAttempted' order by global_position`.execute(t.service.database.db);
    const outcomes = attempts.rows.map(({ data }) => {
      return [Object.entries(users).find(([, id]) => id === data.userId)![0], data.actionKey, data.outcome];
    });
    expect(outcomes).toEqual([
      ['u1', 'visit', 'completed'],
      ['u1', 'purchase', 'criteria-not-met'],
      ['u1', 'purchase', 'completed'],
      ['u1', 'visit', 'limit-reached'],
      ['u2', 'purchase', 'out-of-order'],
      ['u2', 'visit', 'completed'],
      ['u2', 'purchase', 'completed'],
      ['u1', 'visit', 'completed'],
      ['u3', 'visit', 'completed'],
      ['u3', 'purchase', 'completed'],
      ['u3', 'review', 'limit-reached'],
    ]);
  });

  it('expires the leaderboard at expiresAt and closes its last window', async () => {
    await runJobsAt('2027-03-14T23:01:00Z');
    expect((await t.request('GET', `/api/v2/admin/leaderboards/${leaderboardId}`, as())).body.status).toBe('expired');
    const last = await standings('current');
    expect(last.body.window).toEqual({ start: '2027-03-07T23:00:00.000Z', end: '2027-03-14T23:00:00.000Z', status: 'closed' });
  });

  it('marks a custom event link expired at its expiry (created 2027-02-28 12:00 for a day)', async () => {
    const linkId = linkUrl.split('/l/')[1]!.split('.')[0]!;
    const link = () => t.service.database.db.selectFrom('custom_event_links').select('expired_at').where('id', '=', linkId).executeTakeFirstOrThrow();
    expect((await link()).expired_at).toEqual(new Date('2027-03-01T12:00:00Z'));
  });
});
