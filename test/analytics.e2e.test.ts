import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GiveawayDrawnEvent } from '../domain/engagement-events.ts';
import { actionStepsSchema, giveawaysOverviewSchema } from '../api/contract/analytics.ts';
import { challengeStepAnalyticsProjection } from '../projectors/challenge-step-analytics.ts';
import { giveawayAnalyticsProjection } from '../projectors/giveaway-analytics.ts';
import type { Projection } from '../projectors/projection.ts';
import { liveGeneration, startRebuild } from '../projectors/runtime/index.ts';
import { ManualClock } from './support/clock.ts';
import { waitUntil } from './support/projections.ts';
import { asTenant, startTestService, type Tenant, type TestService } from './support/service.ts';

/**
 * The analytics family on a programme scripted through the HTTP API on a clock the test moves.
 *
 * Acme is in America/New_York (UTC-5 in March 2027) with French as its default language. Its linear,
 * daily challenge has three actions: visit (no criteria; 1 entry into giveaway G1), purchase (total >= 10;
 * 2 entries into G2), review (stars >= 4); completing the challenge pays 3 entries into G1. G1 draws 2
 * winners at 2027-03-05T17:00Z (local noon, 5 March), G2 at 2027-03-20T17:00Z (stays pending). Local days:
 *
 *   2 Mar  u1 visit ✓ (starts run 1, G1 +1) · purchase 5 ✗ criteria · purchase 20 ✓ (G2 +2) · review 5 ✓ →
 *          challenge completed (G1 +3); u2 visit at 03:00Z on 3 March, still 2 March locally ✓ (starts, G1 +1)
 *   3 Mar  u2 purchase 8 ✗ criteria · u2 review 5: out of order (criteria met); u3 visit ✓ (starts, G1 +1) ·
 *          purchase 12 ✓ (G2 +2) · review 2 ✗ criteria; u1 visit ✓ (a new day: run 2 starts, G1 +1)
 *   4 Mar  u4 purchase 30: out of order (criteria met; starts u4's run); u3 review 4 ✓ → completed (G1 +3)
 *   5 Mar  G1 is drawn (entrants u1, u2, u3)
 *   6 Mar  u2 purchase 15 ✓ (G2 +2) · u2 visit: already completed
 *
 * Beta (UTC) runs its own one-action challenge and giveaway on the same days; none of it may show at Acme.
 */
const images = { primaryImageUrl: '', secondaryImageUrl: '' };
const block = (title: string) => ({ title, description: title, light: images, dark: images });
const OVERVIEW = '/api/v2/analytics/rewards/stats/giveaways/overview';
const STEPS = '/api/v2/analytics/challenges/stats/action-steps';

/** The overview's records, built from their figures in the contract's order (one hand derivation per line). */
const summary = (...figures: number[]) =>
  Object.fromEntries(
    [
      'totalGiveaways',
      'activeGiveaways',
      'completedGiveaways',
      'totalEntriesDistributed',
      'uniqueParticipants',
      'totalWinners',
      'averageEntriesPerUser',
      'averageWinRate',
    ].map((field, index) => [field, figures[index]]),
  );
const funnel = (participants: number, multiple: number, winners: number) => [
  { stage: 'participants', count: participants },
  { stage: 'multiple entries', count: multiple },
  { stage: 'winners', count: winners },
];
const day = (date: string, newEntries: number, newParticipants: number, drawings: number) => ({ date, newEntries, newParticipants, drawings });
const source = (name: string, entries: number, percentage: number) => ({ source: name, entries, percentage });

describe('analytics: giveaways overview and challenge step funnel', () => {
  const clock = new ManualClock('2027-02-28T12:00:00Z');
  let t: TestService;
  let acme: Tenant;
  let beta: Tenant;
  let challengeId: string;
  let betaChallengeId: string;
  let g1: string;
  let g2: string;
  let g3: string;
  const actionIds: string[] = [];
  const users: Record<string, string> = {};
  const communities: Record<string, string> = {};

  const post = async (tenant: Tenant, path: string, body: unknown) => {
    const response = await t.request('POST', `/api/v2/admin${path}`, { ...asTenant(tenant), body });
    expect([200, 201], `${path}: ${JSON.stringify(response.body)}`).toContain(response.status);
    return response.body;
  };
  const giveaway = async (tenant: Tenant, communityId: string, titles: Record<string, string>, drawsAt: string, supply: number) => {
    const details = Object.fromEntries(Object.entries(titles).map(([language, title]) => [language, block(title)]));
    return (await post(tenant, '/rewards', { kind: 'entries', communityId, details, drawsAt, supply })).id as string;
  };
  const allocation = async (tenant: Tenant, rewardId: string, amountToDistribute: number) =>
    (await post(tenant, `/rewards/${rewardId}/allocations`, { supply: 100, amountToDistribute })).id as string;
  const entries = (allocationId: string, rewardId: string, amount: number) => ({
    pointsToDistribute: 0,
    bonusXpToDistribute: 0,
    rewardsConfig: { amountToDistribute: 1, allocations: [{ id: allocationId, rewardId, supply: 100, amountToDistribute: amount }] },
  });
  const log = async (at: string, user: string, eventName: string, payload: Record<string, unknown> = {}) => {
    clock.set(at);
    const tenant = user.startsWith('b') ? beta : acme;
    await post(tenant, '/events/custom', { eventName, userId: users[user], communityId: communities[tenant.organisationId], payload });
  };
  const get = (path: string, tenant: Tenant = acme, headers: Record<string, string> = {}) => t.request('GET', path, asTenant(tenant, headers));
  const overview = async (query = '', tenant: Tenant = acme) => {
    const response = await get(`${OVERVIEW}${query}`, tenant);
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    return response.body;
  };
  const steps = async (query = '', headers: Record<string, string> = {}) => {
    const response = await get(`${STEPS}?challengeId=${challengeId}${query}`, acme, headers);
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    return response.body.steps;
  };

  beforeAll(async () => {
    t = await startTestService({ clock, jobs: false, env: { SETTLEMENT_DELAY_SECONDS: '0' } });
    acme = await t.createOrganisation('analytics-acme');
    beta = await t.createOrganisation('analytics-beta');
    await t.request('PATCH', '/api/v2/admin/settings', { ...asTenant(acme), body: { timezone: 'America/New_York', defaultLanguage: 'fr' } });
    for (const [tenant, names] of [
      [acme, ['u1', 'u2', 'u3', 'u4']],
      [beta, ['b1']],
    ] as const) {
      const communityId = (await post(tenant, '/communities', { name: 'Club' })).id as string;
      communities[tenant.organisationId] = communityId;
      for (const name of names) users[name] = (await post(tenant, '/users', { externalUserId: `ext-${name}`, communityIds: [communityId] })).id;
    }
    const acmeCommunity = communities[acme.organisationId]!;
    g1 = await giveaway(acme, acmeCommunity, { en: 'Spring trip', fr: 'Voyage de printemps' }, '2027-03-05T17:00:00Z', 2);
    g2 = await giveaway(acme, acmeCommunity, { en: 'Summer trip', fr: "Voyage d'été" }, '2027-03-20T17:00:00Z', 2);
    const g1Visit = await allocation(acme, g1, 1);
    const g1Completion = await allocation(acme, g1, 3);
    const g2Purchase = await allocation(acme, g2, 2);
    const titled = (en: string, fr: string) => ({ en: block(en), fr: block(fr) });
    const challenge = await post(acme, '/challenges', {
      communityId: acmeCommunity,
      details: titled('Shop week', 'Semaine shopping'),
      actions: [
        { key: 'visit', category: 'participation', details: titled('Visit', 'Visite'), distribution: entries(g1Visit, g1, 1) },
        {
          key: 'purchase',
          category: 'loyalty',
          criteria: [{ field: 'total', operator: 'gte', value: 10 }],
          details: titled('Buy', 'Achat'),
          distribution: entries(g2Purchase, g2, 2),
        },
        { key: 'review', category: 'creativity', criteria: [{ field: 'stars', operator: 'gte', value: 4 }], details: titled('Review', 'Avis') },
      ],
      isLinear: true,
      maxCompletionsPerPeriod: 1,
      period: 'daily',
      startsAt: '2027-03-01T00:00:00Z',
      expiresAt: '2027-04-01T00:00:00Z',
      rewardDistribution: { rewardAllocations: [{ rewardId: g1, allocationId: g1Completion, amountToDistribute: 3 }], numberOfRewardsToReceive: 1 },
    });
    challengeId = challenge.id;
    actionIds.push(...challenge.actions.map((action: { id?: string; actionId?: string }) => action.id ?? action.actionId));

    const betaCommunity = communities[beta.organisationId]!;
    g3 = await giveaway(beta, betaCommunity, { en: 'Beta prize' }, '2027-03-10T12:00:00Z', 1);
    const g3Visit = await allocation(beta, g3, 1);
    betaChallengeId = (
      await post(beta, '/challenges', {
        communityId: betaCommunity,
        details: { en: block('Beta visits') },
        actions: [{ key: 'visit', category: 'participation', details: { en: block('Beta visit') }, distribution: entries(g3Visit, g3, 1) }],
        maxCompletionsPerPeriod: 1,
        period: 'daily',
        startsAt: '2027-03-01T00:00:00Z',
        expiresAt: '2027-04-01T00:00:00Z',
      })
    ).id;

    await log('2027-03-02T10:00:00Z', 'b1', 'visit');
    await log('2027-03-02T14:00:00Z', 'u1', 'visit');
    await log('2027-03-02T14:05:00Z', 'u1', 'purchase', { total: 5 });
    await log('2027-03-02T14:10:00Z', 'u1', 'purchase', { total: 20 });
    await log('2027-03-02T14:15:00Z', 'u1', 'review', { stars: 5 });
    await log('2027-03-03T03:00:00Z', 'u2', 'visit');
    await log('2027-03-03T10:00:00Z', 'b1', 'visit');
    await log('2027-03-03T15:00:00Z', 'u2', 'purchase', { total: 8 });
    await log('2027-03-03T15:05:00Z', 'u2', 'review', { stars: 5 });
    await log('2027-03-03T16:00:00Z', 'u3', 'visit');
    await log('2027-03-03T16:05:00Z', 'u3', 'purchase', { total: 12 });
    await log('2027-03-03T16:10:00Z', 'u3', 'review', { stars: 2 });
    await log('2027-03-03T18:00:00Z', 'u1', 'visit');
    await log('2027-03-04T15:00:00Z', 'u4', 'purchase', { total: 30 });
    await log('2027-03-04T16:00:00Z', 'u3', 'review', { stars: 4 });
    clock.set('2027-03-05T17:00:00Z');
    await t.settle();
    await t.service.jobs.runDue();
    await t.settle();
    await log('2027-03-06T15:00:00Z', 'u2', 'purchase', { total: 15 });
    await log('2027-03-06T15:05:00Z', 'u2', 'visit');
    await t.settle();
  }, 60_000);
  afterAll(async () => {
    await t.close();
  });

  it('drew G1 once, from the entries derived by hand, and left G2 pending', async () => {
    const drawn = (await t.service.store.readStream(`reward-${g1}`)).filter((event) => event.type === 'GiveawayDrawn');
    expect(drawn).toHaveLength(1);
    const draw = drawn[0]!.data as GiveawayDrawnEvent['data'];
    // G1: u1 1 + 3 + 1, u2 1, u3 1 + 3.
    expect(Object.fromEntries(draw.entrants.map((entrant) => [entrant.userId, entrant.entries]))).toEqual({ [users.u1!]: 5, [users.u2!]: 1, [users.u3!]: 4 });
    expect(draw.winners).toHaveLength(2);
    expect((await t.service.store.readStream(`reward-${g2}`)).map((event) => event.type)).not.toContain('GiveawayDrawn');
  });

  describe('GET /challenges/stats/action-steps', () => {
    it('gives every step, in order, with every contract field as derived by hand', async () => {
      const body = await steps();
      expect(actionStepsSchema.strict().safeParse({ steps: body }).success).toBe(true);
      for (const step of body) {
        for (const field of ['actionId', 'actionTitle', 'actionKey', 'category']) expect(typeof step[field], field).toBe('string');
        for (const field of [
          'stepIndex',
          'completionRate',
          'totalCompletions',
          'dropOffRate',
          'criteriaMetCount',
          'criteriaNotMetCount',
          'totalAttempts',
          'uniqueUsersCount',
        ]) {
          expect(typeof step[field], field).toBe('number');
        }
      }
      // Started: runs u1 ×2, u2, u3, u4 = 5 starts by 4 users. Titles in French, the default language.
      expect(body).toEqual([
        {
          // Attempts: u1, u2, u3, u1 (run 2), u2 (already completed) = 5, no criteria so all met; completions 4
          // by u1, u2, u3. completionRate 3 / 4; dropOffRate 1 - 4 / 5 starts.
          actionId: actionIds[0],
          actionTitle: 'Visite',
          actionKey: 'visit',
          category: 'participation',
          stepIndex: 0,
          completionRate: 0.75,
          totalCompletions: 4,
          dropOffRate: 0.2,
          criteriaMetCount: 5,
          criteriaNotMetCount: 0,
          totalAttempts: 5,
          uniqueUsersCount: 3,
        },
        {
          // Attempts: u1 5 ✗, u1 20 ✓, u2 8 ✗, u3 12 ✓, u4 30 (out of order), u2 15 ✓ = 6; met 4, not met 2;
          // completions 3 by u1, u3, u2 → 3 / 4; dropOffRate 1 - 3 / 4. Attempted by u1, u2, u3, u4.
          actionId: actionIds[1],
          actionTitle: 'Achat',
          actionKey: 'purchase',
          category: 'loyalty',
          stepIndex: 1,
          completionRate: 0.75,
          totalCompletions: 3,
          dropOffRate: 0.25,
          criteriaMetCount: 4,
          criteriaNotMetCount: 2,
          totalAttempts: 6,
          uniqueUsersCount: 4,
        },
        {
          // Attempts: u1 5 ✓, u2 5 (out of order), u3 2 ✗, u3 4 ✓ = 4; met 3; completions 2 by u1, u3 → 2 / 4;
          // dropOffRate 1 - 2 / 3 = 0.3333.
          actionId: actionIds[2],
          actionTitle: 'Avis',
          actionKey: 'review',
          category: 'creativity',
          stepIndex: 2,
          completionRate: 0.5,
          totalCompletions: 2,
          dropOffRate: 0.3333,
          criteriaMetCount: 3,
          criteriaNotMetCount: 1,
          totalAttempts: 4,
          uniqueUsersCount: 3,
        },
      ]);
    });

    it('titles steps in x-language, its primary subtag, else the default language', async () => {
      const titles = async (language: string) => (await steps('', { 'x-language': language })).map((step: { actionTitle: string }) => step.actionTitle);
      expect(await titles('en')).toEqual(['Visit', 'Buy', 'Review']);
      expect(await titles('en-GB')).toEqual(['Visit', 'Buy', 'Review']);
      expect(await titles('de')).toEqual(['Visite', 'Achat', 'Avis']);
      expect((await get(`${STEPS}?challengeId=${challengeId}`, acme, { 'x-language': 'not a tag' })).status).toBe(400);
    });

    it('counts only the local days of a range; a date-time stands for its local day', async () => {
      // 3 March in New York: u2 purchase 8 ✗, u2 review (out of order), u3 visit ✓, purchase 12 ✓, review 2 ✗,
      // u1 visit ✓ (u2's visit at 03:00Z is still 2 March). Starts: u3, u1 (run 2) → 2 by 2 users.
      const day = [
        { totalAttempts: 2, criteriaMetCount: 2, criteriaNotMetCount: 0, totalCompletions: 2, uniqueUsersCount: 2, completionRate: 1, dropOffRate: 0 },
        { totalAttempts: 2, criteriaMetCount: 1, criteriaNotMetCount: 1, totalCompletions: 1, uniqueUsersCount: 2, completionRate: 0.5, dropOffRate: 0.5 },
        { totalAttempts: 2, criteriaMetCount: 1, criteriaNotMetCount: 1, totalCompletions: 0, uniqueUsersCount: 2, completionRate: 0, dropOffRate: 1 },
      ].map((figures, stepIndex) => expect.objectContaining({ stepIndex, actionId: actionIds[stepIndex], ...figures }));
      expect(await steps('&from=2027-03-03&to=2027-03-03')).toEqual(day);
      // 05:00Z is local midnight; 04:59:59Z on 4 March is 23:59:59 on 3 March.
      expect(await steps('&from=2027-03-03T05:00:00Z&to=2027-03-04T04:59:59Z')).toEqual(day);
      expect(await steps('&from=2027-03-03T00:00:00-05:00&to=2027-03-03')).toEqual(day);
      // A range covering every day gives the all-time figures (read from other tables).
      expect(await steps('&from=2027-03-01&to=2027-03-31')).toEqual(await steps());
      expect(await steps('&from=2027-03-01')).toEqual(await steps());
      // Nothing happened on 5 March: every figure 0, rates 0 (nothing to divide by).
      const quiet = await steps('&from=2027-03-05&to=2027-03-05');
      expect(quiet.map((step: Record<string, unknown>) => [step.totalAttempts, step.uniqueUsersCount, step.completionRate, step.dropOffRate])).toEqual([
        [0, 0, 0, 0],
        [0, 0, 0, 0],
        [0, 0, 0, 0],
      ]);
    });

    it('400 without a challengeId, with one that is not 24 hex, or with a bad range', async () => {
      for (const query of ['', '?challengeId=xyz', `?challengeId=${challengeId}&from=yesterday`, `?challengeId=${challengeId}&from=2027-03-04&to=2027-03-03`]) {
        const response = await get(`${STEPS}${query}`);
        expect(response.status, query).toBe(400);
        expect(response.body.code).toBe('BAD_REQUEST');
        expect(response.body.issues.length, query).toBeGreaterThan(0);
      }
    });

    it("404 for another organisation's challenge or an unknown one; each organisation sees its own", async () => {
      expect((await get(`${STEPS}?challengeId=${betaChallengeId}`)).status).toBe(404);
      expect((await get(`${STEPS}?challengeId=${challengeId}`, beta)).status).toBe(404);
      expect((await get(`${STEPS}?challengeId=${'0'.repeat(24)}`)).status).toBe(404);
      // Beta: b1 visited on 2 and 3 March, each day a new run (daily limit 1) that completes at once.
      const betaSteps = await get(`${STEPS}?challengeId=${betaChallengeId.toUpperCase()}`, beta);
      expect(betaSteps.body.steps).toEqual([
        expect.objectContaining({ actionTitle: 'Beta visit', totalAttempts: 2, totalCompletions: 2, uniqueUsersCount: 1, completionRate: 1, dropOffRate: 0 }),
      ]);
    });
  });

  describe('GET /rewards/stats/giveaways/overview', () => {
    it('sums up every giveaway as derived by hand, with every contract field', async () => {
      const body = await overview();
      expect(giveawaysOverviewSchema.strict().safeParse(body).success).toBe(true);
      expect(Object.values(body.summary).every((value) => typeof value === 'number')).toBe(true);
      expect(body).toEqual({
        // Entries: G1 u1 5, u2 1, u3 4 (10); G2 u1 2, u3 2, u2 2 (6). Win rate: 2 winners / 3 entrants of G1.
        summary: summary(2, 1, 1, 16, 3, 2, 5.3333, 0.6667),
        // Actions: G1 visits 4 + G2 purchases 6 = 10; challenge completions 3 + 3 = 6.
        entryDistribution: [source('action', 10, 0.625), source('challenge', 6, 0.375)],
        // u1 7, u2 3, u3 6 entries in all: everyone entered more than once.
        participationFunnel: funnel(3, 3, 2),
        // New participants per giveaway: 2 March G1 u1, u2 and G2 u1; 3 March G1 u3 and G2 u3; 6 March G2 u2.
        timeseries: [
          day('2027-03-02', 7, 3, 0),
          day('2027-03-03', 4, 2, 0),
          day('2027-03-04', 3, 0, 0),
          day('2027-03-05', 0, 0, 1),
          day('2027-03-06', 2, 1, 0),
        ],
        // Both have 3 participants; G1 has more entries. Titles in French, the default language.
        popularGiveaways: [
          { rewardId: g1, title: 'Voyage de printemps', drawDate: '2027-03-05T17:00:00.000Z', participants: 3, totalEntries: 10 },
          { rewardId: g2, title: "Voyage d'été", drawDate: '2027-03-20T17:00:00.000Z', participants: 3, totalEntries: 6 },
        ],
      });
      const english = await get(OVERVIEW, acme, { 'x-language': 'en' });
      expect(english.body.popularGiveaways.map((g: { title: string }) => g.title)).toEqual(['Spring trip', 'Summer trip']);
    });

    it('status=drawn: G1 alone', async () => {
      expect(await overview('?status=drawn')).toEqual({
        summary: summary(1, 0, 1, 10, 3, 2, 3.3333, 0.6667),
        entryDistribution: [source('challenge', 6, 0.6), source('action', 4, 0.4)],
        // u1 5 and u3 4 entered more than once; u2 once.
        participationFunnel: funnel(3, 2, 2),
        timeseries: [day('2027-03-02', 5, 2, 0), day('2027-03-03', 2, 1, 0), day('2027-03-04', 3, 0, 0), day('2027-03-05', 0, 0, 1)],
        popularGiveaways: [{ rewardId: g1, title: 'Voyage de printemps', drawDate: '2027-03-05T17:00:00.000Z', participants: 3, totalEntries: 10 }],
      });
    });

    it('status=pending: G2 alone, no winners, a win rate of 0', async () => {
      expect(await overview('?status=pending')).toEqual({
        summary: summary(1, 1, 0, 6, 3, 0, 2, 0),
        entryDistribution: [source('action', 6, 1)],
        participationFunnel: funnel(3, 3, 0),
        // Dense from the first to the last day with activity: 4 and 5 March are zeros.
        timeseries: [
          day('2027-03-02', 2, 1, 0),
          day('2027-03-03', 2, 1, 0),
          day('2027-03-04', 0, 0, 0),
          day('2027-03-05', 0, 0, 0),
          day('2027-03-06', 2, 1, 0),
        ],
        popularGiveaways: [{ rewardId: g2, title: "Voyage d'été", drawDate: '2027-03-20T17:00:00.000Z', participants: 3, totalEntries: 6 }],
      });
    });

    it('a range selects giveaways drawing on its days and counts the entries made on its days', async () => {
      // 3 to 5 March selects G1 (draws 5 March); its entries those days: u3 1 and u1 1 on the 3rd, u3 3 on the 4th.
      const expected = {
        summary: summary(1, 0, 1, 5, 2, 2, 2.5, 0.6667),
        entryDistribution: [source('challenge', 3, 0.6), source('action', 2, 0.4)],
        participationFunnel: funnel(2, 1, 2),
        timeseries: [day('2027-03-03', 2, 1, 0), day('2027-03-04', 3, 0, 0), day('2027-03-05', 0, 0, 1)],
        popularGiveaways: [{ rewardId: g1, title: 'Voyage de printemps', drawDate: '2027-03-05T17:00:00.000Z', participants: 2, totalEntries: 5 }],
      };
      expect(await overview('?from=2027-03-03&to=2027-03-05')).toEqual(expected);
      expect(await overview('?from=2027-03-03T05:00:00Z&to=2027-03-06T04:59:59.999Z&status=all')).toEqual(expected);
      // From 6 March: G2 (draws on the 20th) and u2's 2 entries of that day.
      const later = await overview('?from=2027-03-06');
      expect(later.summary).toEqual(summary(1, 1, 0, 2, 1, 0, 2, 0));
      expect(later.timeseries).toEqual([day('2027-03-06', 2, 1, 0)]);
      // A range covering everything gives the all-time figures (read from other tables).
      expect(await overview('?from=2027-01-01&to=2027-12-31')).toEqual(await overview());
      // Nothing draws in February: all zeros, empty lists.
      expect(await overview('?to=2027-02-28')).toEqual({
        summary: summary(0, 0, 0, 0, 0, 0, 0, 0),
        entryDistribution: [],
        participationFunnel: funnel(0, 0, 0),
        timeseries: [],
        popularGiveaways: [],
      });
    });

    it('400 for an unknown status, a malformed date or a reversed range', async () => {
      for (const query of ['?status=open', '?from=2027-13-01', '?to=tomorrow', '?from=2027-03-05&to=2027-03-04', '?from=2027-03-05T10:00:00']) {
        const response = await get(`${OVERVIEW}${query}`);
        expect(response.status, query).toBe(400);
        expect(response.body).toMatchObject({ code: 'BAD_REQUEST', message: 'Invalid input data' });
        expect(response.body.issues.length, query).toBeGreaterThan(0);
      }
    });

    it('shows each organisation its own giveaways only', async () => {
      // Beta: G3, b1's two visits (1 entry each), not drawn.
      const body = await overview('', beta);
      expect(body.summary).toEqual(summary(1, 1, 0, 2, 1, 0, 2, 0));
      expect(body.popularGiveaways).toEqual([{ rewardId: g3, title: 'Beta prize', drawDate: '2027-03-10T12:00:00.000Z', participants: 1, totalEntries: 2 }]);
      expect(body.timeseries).toEqual([day('2027-03-02', 1, 1, 0), day('2027-03-03', 1, 0, 0)]);
    });
  });

  describe('the analytics family', () => {
    it('401 without a token or on another domain, 403 with a token lacking the family', async () => {
      for (const path of [OVERVIEW, `${STEPS}?challengeId=${challengeId}`]) {
        const anonymous = await t.request('GET', path, { host: acme.domain });
        expect(anonymous.status).toBe(401);
        expect(anonymous.body.code).toBe('UNAUTHORIZED');
        expect((await t.request('GET', path, { host: beta.domain, headers: { 'x-api-token': acme.token } })).status).toBe(401);
      }
      const adminOnly = await t.issueToken({ organisationId: acme.organisationId, name: 'admin only', families: ['admin', 'integration'] });
      const forbidden = await t.request('GET', OVERVIEW, { host: acme.domain, headers: { 'x-api-token': adminOnly.token } });
      expect(forbidden.status).toBe(403);
      expect(forbidden.body.code).toBe('FORBIDDEN');
      const analyticsOnly = await t.issueToken({ organisationId: acme.organisationId, name: 'dashboards', families: ['analytics'] });
      expect((await t.request('GET', OVERVIEW, { host: acme.domain, headers: { 'x-api-token': analyticsOnly.token } })).status).toBe(200);
      expect((await t.request('GET', '/api/v2/admin/rewards', { host: acme.domain, headers: { 'x-api-token': analyticsOnly.token } })).status).toBe(403);
    });

    it('serves its OpenAPI 3.1 document without credentials, saying rates are fractions', async () => {
      const response = await t.request('GET', '/api/v2/analytics/openapi.json', { host: acme.domain });
      expect(response.status).toBe(200);
      const document = response.body;
      expect(document.openapi).toBe('3.1.0');
      const overviewOperation = document.paths['/rewards/stats/giveaways/overview'].get;
      const stepsOperation = document.paths['/challenges/stats/action-steps'].get;
      expect(overviewOperation.description).toMatch(/fractions in \[0, 1\] rounded to 4 decimals/);
      expect(stepsOperation.description).toMatch(/fractions in \[0, 1\] rounded to 4 decimals/);
      const parameter = (operation: { parameters: { name: string; required: boolean; schema: Record<string, unknown> }[] }, name: string) =>
        operation.parameters.find((candidate) => candidate.name === name);
      expect(parameter(overviewOperation, 'status')?.schema).toMatchObject({ enum: ['pending', 'drawn', 'all'], default: 'all' });
      expect(parameter(stepsOperation, 'challengeId')?.required).toBe(true);
      expect(parameter(overviewOperation, 'from')?.required).toBe(false);
      expect(Object.keys(overviewOperation.responses)).toEqual(expect.arrayContaining(['200', '400', '401', '403', '404']));
      expect((await t.request('GET', '/api/v2/analytics/docs', { host: acme.domain })).status).toBe(200);
    });

    it('rebuilds both read models from the events alone into what the live ones hold', async () => {
      const snapshot = async (projection: Projection) => {
        const tables: Record<string, string[]> = {};
        for (const table of projection.tables) {
          const rows = await sql<Record<string, unknown>>`select * from ${sql.table(table)}`.execute(t.service.database.db);
          tables[table] = rows.rows.map((row) => JSON.stringify(row)).sort();
        }
        return tables;
      };
      for (const projection of [giveawayAnalyticsProjection, challengeStepAnalyticsProjection]) {
        const live = await snapshot(projection);
        expect(Object.values(live).every((rows) => rows.length > 0)).toBe(true);
        const before = await liveGeneration(t.service.database.db, projection.name);
        const building = await startRebuild(t.service.database.db, projection);
        await waitUntil(async () => (await liveGeneration(t.service.database.db, projection.name))?.generation === building.generation, 30_000, 'the swap');
        expect(building.generation).toBeGreaterThan(before!.generation);
        expect(await snapshot(projection)).toEqual(live);
      }
    });
  });
});
