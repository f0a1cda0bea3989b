import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEngageClient } from '../clients/typescript/src/index.ts';
import { hostFetch } from './support/host-fetch.ts';
import { waitUntil } from './support/projections.ts';
import { startTestService, type TestService } from './support/service.ts';

/**
 * The quick start through the generated TypeScript client only: with an organisation's token (as
 * `engage org create` gives it), a leaderboard, a challenge, a custom event, then the standings. Every call
 * is typed by the documents the service serves.
 */
describe('the typed TypeScript client', () => {
  let t: TestService;
  let server: Server;

  beforeAll(async () => {
    t = await startTestService();
    server = t.service.app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
  });
  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
    await t?.close();
  });

  it('runs the quick start: token, leaderboard, custom event, standings', async () => {
    const organisation = await t.createOrganisation('client');
    const engage = createEngageClient({
      baseUrl: `http://${organisation.domain}`,
      token: organisation.token,
      fetch: hostFetch((server.address() as AddressInfo).port),
    });
    const images = { primaryImageUrl: '', secondaryImageUrl: '' };
    const now = Date.now();

    const community = await engage.admin.POST('/communities', { body: { name: 'Coffee club' } });
    expect(community.response.status, JSON.stringify(community.error)).toBe(201);
    const communityId = community.data!.id;
    const leaderboard = await engage.admin.POST('/leaderboards', {
      body: { name: 'Weekly XP', metricType: 'total-xp', startsAt: new Date(now - 86_400_000).toISOString(), status: 'live', period: 'weekly' },
    });
    expect(leaderboard.response.status, JSON.stringify(leaderboard.error)).toBe(200);
    expect(leaderboard.data).toMatchObject({ name: 'Weekly XP', status: 'live', organisationId: organisation.organisationId });
    const challenge = await engage.admin.POST('/challenges', {
      body: {
        communityId,
        details: { en: { title: 'Visit', description: '', light: images, dark: images } },
        actions: [
          { key: 'visit', category: 'participation', xp: 10, criteria: [], details: { en: { title: 'Visit', description: '', light: images, dark: images } } },
        ],
        isLinear: false,
        maxCompletionsPerPeriod: 5,
        period: 'daily',
        startsAt: new Date(now - 86_400_000).toISOString(),
        expiresAt: new Date(now + 30 * 86_400_000).toISOString(),
      },
    });
    expect(challenge.response.status, JSON.stringify(challenge.error)).toBe(201);

    const logged = await engage.admin.POST('/events/custom', {
      body: { eventName: 'visit', userId: 'customer-1', communityId, autoCreateUser: true, payload: { store: 'north' } },
    });
    expect(logged.response.status, JSON.stringify(logged.error)).toBe(200);
    expect(logged.data).toMatchObject({ name: 'visit', externalUserId: 'customer-1' });

    const standings = () =>
      engage.integration.GET('/leaderboards/{leaderboardId}/standings', { params: { path: { leaderboardId: leaderboard.data!.id }, query: { limit: 10 } } });
    await waitUntil(async () => ((await standings()).data?.totalCount ?? 0) > 0, 20_000, 'the standings');
    const { data } = await standings();
    expect(data!.edges[0]).toMatchObject({ rank: 1, userId: logged.data!.userId, score: 10 });

    // The contract's error body, typed, on a 4xx.
    const refused = await engage.admin.POST('/leaderboards', {
      body: { name: '', metricType: 'total-xp', startsAt: 'soon', status: 'live', period: 'weekly' },
    });
    expect(refused.response.status).toBe(400);
    expect(refused.error).toMatchObject({ code: 'BAD_REQUEST', issues: expect.any(Array) });
  });
});
