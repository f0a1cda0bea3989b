import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EngagementEvent } from '../domain/engagement-events.ts';
import { METRIC_TYPES, PERIODS, metricFitsPeriod, type MetricType, type Period } from '../domain/leaderboard.ts';
import { rankStandings, scoreFacts, type MetricFact } from '../domain/standings.ts';
import { leaderboardWindowAt } from '../domain/windows.ts';
import { ManualClock } from './support/clock.ts';
import { asTenant, startTestService, type Tenant, type TestService } from './support/service.ts';

const images = { primaryImageUrl: '', secondaryImageUrl: '' };
const block = (title: string) => ({ title, description: title, light: images, dark: images });
const TIME_ZONE = 'America/New_York';
const STARTS_AT = '2027-01-01T05:00:00.000Z'; // local midnight in New York

/**
 * The live standings read model, checked against the pure scoring (`scoreFacts`, `rankStandings`) on every
 * metric and period: a scripted month of custom events from four users in two communities, in a time zone
 * where 03:00 UTC is still the previous day, feeds leaderboards with community and variable conditions; for
 * each leaderboard and window the endpoint must serve exactly the ranking the pure functions compute from
 * the engine's facts.
 */
describe('leaderboard standings equal the pure scoring of the facts', () => {
  const clock = new ManualClock('2026-12-31T12:00:00Z');
  let t: TestService;
  let acme: Tenant;
  const communities: Record<'home' | 'away', string> = { home: '', away: '' };
  const users: string[] = [];
  const variables = new Map<string, string>();
  const leaderboards: { id: string; metricType: MetricType; period: Period; conditions: { community?: string; tier?: string } }[] = [];
  const post = async (path: string, body: unknown) => {
    const response = await t.request('POST', `/api/v2/admin${path}`, { ...asTenant(acme), body });
    expect([200, 201], `${path}: ${JSON.stringify(response.body)}`).toContain(response.status);
    return response.body;
  };

  beforeAll(async () => {
    t = await startTestService({ clock, jobs: false });
    acme = await t.createOrganisation('standings');
    await t.request('PATCH', '/api/v2/admin/settings', { ...asTenant(acme), body: { timezone: TIME_ZONE } });
    communities.home = (await post('/communities', { name: 'Home' })).id;
    communities.away = (await post('/communities', { name: 'Away' })).id;
    const tier = (await post('/variable-configs', { key: 'tier', type: 'string' })).id;
    for (let i = 0; i < 4; i++) {
      const id = (await post('/users', { externalUserId: `player-${i}`, communityIds: [communities.home, communities.away] })).id;
      users.push(id);
      const value = i % 2 === 0 ? 'gold' : 'silver';
      variables.set(id, value);
      expect(
        (await t.request('PUT', `/api/v2/admin/users/${id}/variables`, { ...asTenant(acme), body: { values: [{ variableConfigId: tier, value }] } })).status,
      ).toBe(200);
    }
    const challenge = (communityId: string, actions: { key: string; xp: number; criteria?: unknown[] }[], period: string, max: number) =>
      post('/challenges', {
        communityId,
        details: { en: block('Challenge') },
        actions: actions.map((action) => ({ category: 'knowledge', criteria: [], isSkippable: false, details: { en: block(action.key) }, ...action })),
        isLinear: false,
        maxCompletionsPerPeriod: max,
        period,
        startsAt: STARTS_AT,
        expiresAt: '2028-01-01T00:00:00Z',
        rewardDistribution: { points: 0, xp: 4, rewardAllocations: [], numberOfRewardsToReceive: 0 },
      });
    await challenge(
      communities.home,
      [
        { key: 'read', xp: 5 },
        { key: 'write', xp: 7, criteria: [{ field: 'words', operator: 'gte', value: 2 }] },
      ],
      'daily',
      2,
    );
    await challenge(communities.home, [{ key: 'read', xp: 3 }], 'open', 1);
    await challenge(communities.away, [{ key: 'read', xp: 11 }], 'weekly', 1);

    const conditionSets = [{ community: communities.home }, { tier: 'gold' }, { community: communities.away, tier: 'silver' }];
    for (const metricType of METRIC_TYPES) {
      for (const period of PERIODS) {
        if (!metricFitsPeriod(metricType, period)) continue;
        for (const conditions of conditionSets) {
          const body = {
            name: `${metricType} ${period}`,
            metricType,
            period,
            startsAt: STARTS_AT,
            status: 'live',
            conditions: [
              ...(conditions.community ? [{ type: 'community', communityId: conditions.community }] : []),
              ...(conditions.tier ? [{ type: 'variable-config', variableConfigId: tier, value: conditions.tier }] : []),
            ],
          };
          leaderboards.push({ id: (await post('/leaderboards', body)).id, metricType, period, conditions });
        }
      }
    }

    // A deterministic script: 40 days from 1 January, each user acting in a pattern of its own, some events
    // at 03:xx UTC (the previous day in New York), across the turn of the week and month.
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    for (let day = 0; day < 40; day++) {
      for (const [index, userId] of users.entries()) {
        if (next() < 0.35) continue;
        const hour = next() < 0.3 ? 3 : 14;
        clock.set(new Date(Date.parse('2027-01-01T00:00:00Z') + day * 86_400_000 + hour * 3_600_000 + index * 60_000).toISOString());
        const eventName = next() < 0.6 ? 'read' : 'write';
        const communityId = next() < 0.75 ? communities.home : communities.away;
        await post('/events/custom', { eventName, userId, communityId, payload: { words: Math.floor(next() * 4) } });
      }
    }
    await t.settle();
  }, 120_000);
  afterAll(async () => {
    await t.close();
  });

  it('serves, for every metric, period and condition, the ranking computed from the facts', async () => {
    const facts = (
      await sql<{ type: EngagementEvent['type']; data: EngagementEvent['data'] }>`
        select event_type as type, data from es_events
        where event_type in ('XpEarned', 'ActionCompleted', 'ChallengeStarted', 'ChallengeCompleted') order by global_position`.execute(t.service.database.db)
    ).rows as EngagementEvent[];
    expect(facts.length).toBeGreaterThan(100);
    const asMetricFact = (event: EngagementEvent): MetricFact | null => {
      const base = { userId: event.data.userId, occurredAt: event.data.occurredAt };
      switch (event.type) {
        case 'XpEarned':
          return { ...base, kind: 'xp', amount: event.data.amount, fromLeaderboard: event.data.source.kind === 'leaderboard' };
        case 'ActionCompleted':
          return { ...base, kind: 'action-completed', challengeId: event.data.challengeId };
        case 'ChallengeStarted':
          return { ...base, kind: 'challenge-started', challengeId: event.data.challengeId };
        case 'ChallengeCompleted':
          return { ...base, kind: 'challenge-completed', challengeId: event.data.challengeId };
        default:
          return null;
      }
    };
    let windowsChecked = 0;
    for (const leaderboard of leaderboards) {
      const windows = new Map<string, MetricFact[]>();
      for (const event of facts) {
        if (leaderboard.conditions.community && event.data.communityId !== leaderboard.conditions.community) continue;
        if (leaderboard.conditions.tier && variables.get(event.data.userId) !== leaderboard.conditions.tier) continue;
        const window = leaderboardWindowAt({ period: leaderboard.period, startsAt: STARTS_AT, expiresAt: null }, TIME_ZONE, event.data.occurredAt);
        const fact = asMetricFact(event);
        if (!window || !fact) continue;
        windows.set(window.start, [...(windows.get(window.start) ?? []), fact]);
      }
      for (const [start, windowFacts] of windows) {
        const expected = rankStandings(scoreFacts(leaderboard.metricType, windowFacts, TIME_ZONE)).map((s) => [s.rank, s.userId, s.score, s.reachedAt]);
        const response = await t.request('GET', `/api/v2/integration/leaderboards/${leaderboard.id}/standings?window=${start}&limit=100`, asTenant(acme));
        expect(response.status).toBe(200);
        expect(response.body.window.start, `${leaderboard.metricType} ${leaderboard.period}`).toBe(start);
        const served = response.body.edges.map((s: { rank: number; userId: string; score: number; reachedAt: string }) => [
          s.rank,
          s.userId,
          s.score,
          s.reachedAt,
        ]);
        expect(served, `${leaderboard.metricType} ${leaderboard.period} ${JSON.stringify(leaderboard.conditions)} window ${start}`).toEqual(expected);
        windowsChecked++;
      }
    }
    // Every leaderboard had windows with facts, and the daily ones many.
    expect(windowsChecked).toBeGreaterThan(leaderboards.length * 3);
  });
});
