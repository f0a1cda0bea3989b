import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asTenant, startTestService, type Tenant, type TestService } from './support/service.ts';
import { block } from './support/programme.ts';

/**
 * `x-min-position` of a custom event covers what the engine derives from it: read with it, the user's points
 * and XP and the leaderboard's standings include the event's, not only the event (they are the engine's appends,
 * committed after the event; a read waited for the event alone and showed 0 points in 10 tries of 10), and
 * the challenge templates count the runs started and completed (they answered 0 whatever users did).
 */
describe('read-your-writes covers what a write leads to', () => {
  let t: TestService;
  let acme: Tenant;
  let communityId: string;
  let leaderboardId: string;

  beforeAll(async () => {
    t = await startTestService();
    acme = await t.createOrganisation('consequences');
    const community = await t.request('POST', '/api/v2/admin/communities', { ...asTenant(acme), body: { name: 'Shop' } });
    expect(community.status).toBe(201);
    communityId = community.body.id;
    const challenge = await t.request('POST', '/api/v2/admin/challenges', {
      ...asTenant(acme),
      body: {
        communityId,
        details: { en: block('Buyer') },
        actions: [
          {
            key: 'bought',
            category: 'loyalty',
            xp: 5,
            details: { en: block('Buy') },
            distribution: { pointsToDistribute: 7, bonusXpToDistribute: 3 },
          },
        ],
        startsAt: '2020-01-01T00:00:00Z',
        expiresAt: '2099-01-01T00:00:00Z',
        maxCompletionsPerPeriod: 2,
      },
    });
    expect(challenge.status, challenge.text).toBe(201);
    const leaderboard = await t.request('POST', '/api/v2/admin/leaderboards', {
      ...asTenant(acme),
      body: { name: 'All time XP', metricType: 'total-xp', startsAt: '2020-01-06T00:00:00Z', status: 'live', period: 'open' },
    });
    expect(leaderboard.status, leaderboard.text).toBe(200);
    leaderboardId = leaderboard.body.id;
    await t.settle();
  });

  afterAll(() => t?.close());

  it("shows the event's points, XP and rank on the very read that names its position", async () => {
    for (let buyer = 1; buyer <= 5; buyer++) {
      const logged = await t.request('POST', '/api/v2/admin/events/custom', {
        ...asTenant(acme),
        body: { eventName: 'bought', userId: `buyer-${buyer}`, communityId, autoCreateUser: true },
      });
      expect(logged.status, logged.text).toBe(200);
      const position = logged.headers['x-event-position'] as string;
      const user = await t.request('GET', `/api/v2/admin/users/${logged.body.userId}`, asTenant(acme, { 'x-min-position': position }));
      expect(user.status, user.text).toBe(200);
      expect({ buyer, points: user.body.points, xp: user.body.xp.total }).toEqual({ buyer, points: 7, xp: 8 });
      const standings = await t.request(
        'GET',
        `/api/v2/integration/leaderboards/${leaderboardId}/standings?limit=100`,
        asTenant(acme, { 'x-min-position': position }),
      );
      expect(standings.status, standings.text).toBe(200);
      expect({ buyer, ranked: standings.body.totalCount }).toEqual({ buyer, ranked: buyer });
      // The challenge's counters among the templates: a run started and completed by each buyer so far.
      const templates = await t.request('GET', '/api/v2/admin/templates/challenges', asTenant(acme, { 'x-min-position': position }));
      expect(templates.status, templates.text).toBe(200);
      const [template] = templates.body.edges;
      expect({ buyer, started: template.startedCount, completed: template.completedCount }).toEqual({ buyer, started: buyer, completed: buyer });
      expect([template.uniqueUsersStartedCount, template.uniqueUsersCompletedCount]).toEqual([buyer, buyer]);
    }
    // A second run by a buyer who completed one: a run more, no user more.
    const again = await t.request('POST', '/api/v2/admin/events/custom', {
      ...asTenant(acme),
      body: { eventName: 'bought', userId: 'buyer-1', communityId, autoCreateUser: true },
    });
    expect(again.status, again.text).toBe(200);
    const templates = await t.request(
      'GET',
      '/api/v2/admin/templates/challenges',
      asTenant(acme, { 'x-min-position': again.headers['x-event-position'] as string }),
    );
    const [template] = templates.body.edges;
    expect([template.startedCount, template.completedCount, template.uniqueUsersStartedCount, template.uniqueUsersCompletedCount]).toEqual([6, 6, 5, 5]);
  });
});
