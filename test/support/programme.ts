import { expect } from 'vitest';
import { ManualClock } from './clock.ts';
import { asTenant, startTestService, type Tenant, type TestService } from './service.ts';

const images = { primaryImageUrl: '', secondaryImageUrl: '' };
export const block = (title: string) => ({ title, description: title, light: images, dark: images });

/** Admin calls as one organisation: POST expecting success (its body), users with their user tokens. */
export function adminOf(t: TestService, tenant: Tenant) {
  const post = async (path: string, body: unknown) => {
    const response = await t.request('POST', `/api/v2/admin${path}`, { ...asTenant(tenant), body });
    expect([200, 201], `${path}: ${JSON.stringify(response.body)}`).toContain(response.status);
    return response.body;
  };
  return {
    post,
    community: async (name: string) => (await post('/communities', { name })).id as string,
    user: async (externalUserId: string, communityIds: string[] = []) => {
      const id = (await post('/users', { externalUserId, displayName: externalUserId, communityIds })).id as string;
      return { id, externalUserId, token: (await post(`/users/${id}/tokens`, {})).token as string };
    },
  };
}

export type Member = Awaited<ReturnType<ReturnType<typeof adminOf>['user']>>;

/**
 * A programme that exercises the whole engine, scripted through the HTTP API on a clock the test moves
 * (organisation in UTC; 1 March 2027 is a Monday):
 *
 * - community `coffee`: challenge `coffee` (daily, linear, repeatable once a day): visit (10 XP
 *   participation, 5 points, 1 entry into the giveaway), purchase (`total` >= 10; 20 XP loyalty);
 *   completing it pays 50 points, 15 XP and one code of an asset reward (two codes);
 * - community `tea`: challenge `tea` (daily): brew (5 XP);
 * - leaderboard `weekly` (total-xp, weekly, community coffee): rank 1 gets 100 points and 40 XP, rank 2
 *   50 points; leaderboard `allClubs` (total-actions-completed, weekly, no condition): ranks 1-2 get 10 points;
 * - a giveaway (1 winner) drawn on 6 March.
 *
 *   Mon 1  u1 visit, purchase 20 → coffee run 1 (streak 1)
 *   Tue 2  u1 visit, purchase 15 → run 2 (streak 2); u2 visit, purchase 12 → run 1
 *   Wed 3  u1 visit (streak 3: a milestone), purchase 5 (criteria not met); u3 visit (coffee), brew → tea run 1
 *   Thu 4  u3 brew → tea run 2 (u3 last active in tea)
 *   Sat 6  the giveaway is drawn
 *   Mon 8  week one closes: weekly u1 100 XP (rank 1), u2 45 (2), u3 10 (3);
 *          allClubs u1 5 actions (1), u3 3 (2), u2 2 (3)
 *
 * Beta is another organisation with one user and one event of its own.
 */
export async function runProgramme(env: Record<string, string> = {}) {
  const clock = new ManualClock('2027-02-28T12:00:00Z');
  const t = await startTestService({ clock, jobs: false, env: { SETTLEMENT_DELAY_SECONDS: '60', ...env } });
  const acme = await t.createOrganisation('programme');
  const beta = await t.createOrganisation('programme-beta');
  const admin = adminOf(t, acme);
  const coffee = await admin.community('Coffee club');
  const tea = await admin.community('Tea club');
  const users = {
    u1: await admin.user('ext-u1', [coffee]),
    u2: await admin.user('ext-u2', [coffee]),
    u3: await admin.user('ext-u3', [coffee, tea]),
  };
  const betaAdmin = adminOf(t, beta);
  const betaCommunity = await betaAdmin.community('Beta club');
  const betaUser = await betaAdmin.user('ext-beta', [betaCommunity]);

  const assetRewardId = (
    await admin.post('/rewards', {
      kind: 'asset',
      communityId: coffee,
      details: { en: block('Free coffee') },
      redeemable: { redeemByDate: '2027-12-31T00:00:00Z' },
      codes: ['CODE-1', 'CODE-2'],
      expiresAt: null,
    })
  ).id as string;
  const codeAllocation = (await admin.post(`/rewards/${assetRewardId}/allocations`, { supply: 2, amountToDistribute: 1 })).id as string;
  const giveawayId = (
    await admin.post('/rewards', { kind: 'entries', communityId: coffee, details: { en: block('Trip') }, drawsAt: '2027-03-06T12:00:00Z', supply: 1 })
  ).id as string;
  const entryAllocation = (await admin.post(`/rewards/${giveawayId}/allocations`, { supply: 100, amountToDistribute: 1 })).id as string;
  const nothing = { amountToDistribute: 0, allocations: [] };
  const action = (key: string, category: string, xp: number, extra: Record<string, unknown> = {}) => ({
    key,
    category,
    criteria: [],
    xp,
    isSkippable: false,
    details: { en: block(key) },
    ...extra,
  });
  const daily = { isLinear: true, maxCompletionsPerPeriod: 1, period: 'daily', startsAt: '2027-03-01T00:00:00Z', expiresAt: '2027-04-01T00:00:00Z' };
  const coffeeChallenge = (
    await admin.post('/challenges', {
      communityId: coffee,
      details: { en: block('Coffee week') },
      actions: [
        action('visit', 'participation', 10, {
          distribution: {
            pointsToDistribute: 5,
            bonusXpToDistribute: 0,
            rewardsConfig: { amountToDistribute: 1, allocations: [{ id: entryAllocation, rewardId: giveawayId, supply: 100, amountToDistribute: 1 }] },
          },
        }),
        action('purchase', 'loyalty', 20, { criteria: [{ field: 'total', operator: 'gte', value: 10 }] }),
      ],
      ...daily,
      rewardDistribution: {
        points: 50,
        xp: 15,
        rewardAllocations: [{ rewardId: assetRewardId, allocationId: codeAllocation, amountToDistribute: 1 }],
        numberOfRewardsToReceive: 1,
      },
    })
  ).id as string;
  const teaChallenge = (
    await admin.post('/challenges', {
      communityId: tea,
      details: { en: block('Tea time') },
      actions: [action('brew', 'creativity', 5)],
      ...daily,
    })
  ).id as string;
  const leaderboard = async (name: string, metricType: string, conditions: unknown[], rewards: unknown[]) => {
    const id = (
      await admin.post('/leaderboards', {
        name,
        metricType,
        period: 'weekly',
        startsAt: '2027-03-01T00:00:00Z',
        expiresAt: '2027-03-15T00:00:00Z',
        status: 'scheduled',
        conditions,
      })
    ).id as string;
    await admin.post(`/leaderboards/${id}/distribution`, { rewards });
    return id;
  };
  const weekly = await leaderboard(
    'Coffee champions',
    'total-xp',
    [{ type: 'community', communityId: coffee }],
    [
      { startRank: 1, endRank: 1, pointsToDistribute: 100, bonusXpToDistribute: 40, rewardsConfig: nothing },
      { startRank: 2, endRank: 2, pointsToDistribute: 50, bonusXpToDistribute: 0, rewardsConfig: nothing },
    ],
  );
  const allClubs = await leaderboard(
    'Busiest members',
    'total-actions-completed',
    [],
    [{ startRank: 1, endRank: 2, pointsToDistribute: 10, bonusXpToDistribute: 0, rewardsConfig: nothing }],
  );

  const runJobsAt = async (at: string) => {
    clock.set(at);
    await t.settle();
    await t.service.jobs.runDue();
    await t.settle();
  };
  const logAt = async (at: string, user: keyof typeof users, eventName: string, communityId: string, payload: Record<string, unknown> = {}) => {
    clock.set(at);
    await admin.post('/events/custom', { eventName, userId: users[user].id, communityId, payload });
  };

  await runJobsAt('2027-03-01T00:00:00Z'); // both leaderboards go live
  await logAt('2027-03-01T09:00:00Z', 'u1', 'visit', coffee);
  await logAt('2027-03-01T09:05:00Z', 'u1', 'purchase', coffee, { total: 20 });
  await logAt('2027-03-02T09:00:00Z', 'u1', 'visit', coffee);
  await logAt('2027-03-02T09:05:00Z', 'u1', 'purchase', coffee, { total: 15 });
  await logAt('2027-03-02T10:00:00Z', 'u2', 'visit', coffee);
  await logAt('2027-03-02T10:05:00Z', 'u2', 'purchase', coffee, { total: 12 });
  await logAt('2027-03-03T09:00:00Z', 'u1', 'visit', coffee);
  await logAt('2027-03-03T09:05:00Z', 'u1', 'purchase', coffee, { total: 5 });
  await logAt('2027-03-03T11:00:00Z', 'u3', 'visit', coffee);
  await logAt('2027-03-03T11:30:00Z', 'u3', 'brew', tea);
  await logAt('2027-03-04T08:00:00Z', 'u3', 'brew', tea);
  clock.set('2027-03-04T09:00:00Z');
  await betaAdmin.post('/events/custom', { eventName: 'visit', userId: betaUser.id, communityId: betaCommunity, payload: {} });
  await runJobsAt('2027-03-06T12:01:00Z'); // the giveaway draw
  await runJobsAt('2027-03-08T00:01:00Z'); // week one closes, rank rewards paid

  return {
    t,
    clock,
    acme,
    beta,
    admin,
    communities: { coffee, tea },
    users,
    betaUser,
    challenges: { coffee: coffeeChallenge, tea: teaChallenge },
    leaderboards: { weekly, allClubs },
    giveawayId,
  };
}

export type Programme = Awaited<ReturnType<typeof runProgramme>>;
