import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOf, block } from './support/programme.ts';
import { asTenant, startTestService, type Tenant, type TestService } from './support/service.ts';

/**
 * Defects the fuzz suite (fuzz.e2e.test.ts) found, one regression each:
 *
 * 1. Writes stored references to another organisation's resources: a reward in its community or asking for
 *    its variable, a leaderboard conditioned on its community or variable, a game or challenge in its
 *    community, distributions handing out its rewards or its allocations.
 * 2. The engine handed out another organisation's allocation when a distribution reused its id.
 * 3. A distribution allocation's `supply` up to 2^53 was accepted, and the read model (32-bit) parked it.
 * 4. A challenge whose action had an invalid field inside its details was a 500 (a cross-field rule ran
 *    on the raw, unparsed details).
 * 5. (Guards the fix of 1, whose first version failed on it: a 500.) A command reads an allocation stream
 *    that carries the engine's hand-outs.
 * 6. Answers the OpenAPI documents did not list: 409 for an Idempotency-Key reused with another body (every
 *    idempotent route), 404 for a path id that names nothing (every route with one).
 */
describe('what the fuzz suite found', () => {
  let t: TestService;
  let acme: Tenant;
  let beta: Tenant;
  type Resources = { community: string; reward: string; allocation: string; variable: string; game: string; action: string };
  const ids = {} as Record<'acme' | 'beta', Resources>;
  const post = (tenant: Tenant, path: string, body: unknown, headers: Record<string, string> = {}) =>
    t.request('POST', `/api/v2/admin${path}`, { ...asTenant(tenant, headers), body });
  const soon = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString();
  const assetReward = (communityId: string) => ({
    kind: 'asset',
    communityId,
    details: { en: block('Coffee') },
    redeemable: { redeemByDate: soon(300) },
    expiresAt: null,
  });
  const visitChallenge = (communityId: string, allocation: { id: string; rewardId: string }) => ({
    communityId,
    details: { en: block('Visits') },
    actions: [
      {
        key: 'visit',
        category: 'participation',
        details: { en: block('Visit') },
        distribution: { rewardsConfig: { amountToDistribute: 1, allocations: [{ ...allocation, supply: 10, amountToDistribute: 1 }] } },
      },
    ],
    startsAt: soon(-1),
    expiresAt: soon(300),
  });

  /** The contract's 400, and nothing appended. */
  async function refused(request: () => Promise<{ status: number; body: any }>, status = 400) {
    await t.settle();
    const before = await t.eventCount();
    const response = await request();
    expect(response.status, JSON.stringify(response.body)).toBe(status);
    expect(Object.keys(response.body).sort()).toEqual(status === 400 ? ['code', 'issues', 'message'] : ['code', 'message']);
    expect(await t.eventCount()).toBe(before);
    return response;
  }

  beforeAll(async () => {
    t = await startTestService({ jobs: false });
    acme = await t.createOrganisation('findings');
    beta = await t.createOrganisation('findings-beta');
    for (const [name, tenant] of [
      ['acme', acme],
      ['beta', beta],
    ] as const) {
      const admin = adminOf(t, tenant);
      const community = await admin.community('Club');
      const reward = (await admin.post('/rewards', assetReward(community))).id as string;
      const allocation = (await admin.post(`/rewards/${reward}/allocations`, { supply: 10, amountToDistribute: 1 })).id as string;
      const variable = (await admin.post('/variable-configs', { key: 'tier', type: 'string' })).id as string;
      const game = (await admin.post('/games', { name: 'Wheel', type: 'spin-the-wheel', details: { en: block('Wheel') } })).id as string;
      const challenge = await admin.post('/challenges', visitChallenge(community, { id: 'a'.repeat(23) + (name === 'acme' ? '1' : '2'), rewardId: reward }));
      ids[name] = { community, reward, allocation, variable, game, action: challenge.actions[0].id };
    }
    await t.settle();
  });
  afterAll(async () => {
    await t.close();
  });

  describe("1. another organisation's resources are unknown to a write (400, nothing appended)", () => {
    it('a reward in its community, among the additional communities, or asking for its variable', async () => {
      await refused(() => post(acme, '/rewards', assetReward(ids.beta.community)));
      await refused(() => post(acme, '/rewards', { ...assetReward(ids.acme.community), additionalCommunityIds: [ids.beta.community] }));
      const asking = { redeemByDate: soon(300), additionalInformation: [{ variableConfigId: ids.beta.variable, required: true, position: 1 }] };
      await refused(() => post(acme, '/rewards', { ...assetReward(ids.acme.community), redeemable: asking }));
    });
    it('a leaderboard conditioned on its community or its variable', async () => {
      const leaderboard = { name: 'Weekly', metricType: 'total-xp', startsAt: soon(1), status: 'draft', period: 'weekly' };
      await refused(() => post(acme, '/leaderboards', { ...leaderboard, conditions: [{ type: 'community', communityId: ids.beta.community }] }));
      await refused(() =>
        post(acme, '/leaderboards', { ...leaderboard, conditions: [{ type: 'variable-config', variableConfigId: ids.beta.variable, value: 'gold' }] }),
      );
      const created = await post(acme, '/leaderboards', leaderboard);
      expect(created.status).toBe(200);
      await refused(() =>
        t.request('PATCH', `/api/v2/admin/leaderboards/${created.body.id}`, {
          ...asTenant(acme),
          body: { conditions: [{ type: 'community', communityId: ids.beta.community }] },
        }),
      );
      const rank = { startRank: 1, endRank: 1, rewardsConfig: { amountToDistribute: 1, allocations: [{ rewardId: ids.beta.reward, supply: 1 }] } };
      await refused(() => post(acme, `/leaderboards/${created.body.id}/distribution`, { rewards: [rank] }));
    });
    it('a distribution handing out its reward, or naming its allocation', async () => {
      const ofTheirReward = { rewardsConfig: { amountToDistribute: 1, allocations: [{ rewardId: ids.beta.reward, supply: 1 }] } };
      const ofTheirAllocation = { rewardsConfig: { amountToDistribute: 1, allocations: [{ id: ids.beta.allocation, rewardId: ids.acme.reward, supply: 1 }] } };
      for (const distribution of [ofTheirReward, ofTheirAllocation]) {
        await refused(() => post(acme, `/games/${ids.acme.game}/distribution`, { distributions: [distribution] }));
        await refused(() => post(acme, `/actions/${ids.acme.action}/distribution`, distribution));
      }
      await refused(() => post(acme, '/challenges', visitChallenge(ids.acme.community, { id: ids.beta.allocation, rewardId: ids.acme.reward })));
      await refused(() => post(acme, '/challenges', visitChallenge(ids.acme.community, { id: 'b'.repeat(24), rewardId: ids.beta.reward })));
      await refused(() => post(acme, '/challenges', visitChallenge(ids.beta.community, { id: 'b'.repeat(24), rewardId: ids.acme.reward })));
      await refused(() => post(acme, '/games', { name: 'Theirs', type: 'wheel', communityId: ids.beta.community, details: { en: block('W') } }));
    });
  });

  it("2. a distribution reusing another organisation's allocation id never hands out that organisation's supply", async () => {
    // Beta's challenge named allocation id aaa…2 in its distribution (no allocation stream: the engine keeps it);
    // Acme names the same id with its own reward. Acme's member completing the action must not get Beta's reward.
    const reused = await post(acme, '/challenges', visitChallenge(ids.acme.community, { id: `${'a'.repeat(23)}2`, rewardId: ids.acme.reward }));
    expect(reused.status, JSON.stringify(reused.body)).toBe(201);
    const member = await adminOf(t, acme).user('reuser', [ids.acme.community]);
    await t.settle();
    expect((await post(acme, '/events/custom', { eventName: 'visit', userId: member.id, communityId: ids.acme.community })).status).toBe(200);
    await t.settle();
    const assets = await t.request('GET', '/api/v2/integration/me/reward-assets', asTenant(acme, { authorization: `Bearer ${member.token}` }));
    expect(assets.status).toBe(200);
    // Assets from Acme's own allocations (the fixture challenge's), none of Beta's reward.
    const rewards = assets.body.edges.map((asset: { rewardId: string }) => asset.rewardId);
    expect(rewards.length).toBeGreaterThan(0);
    expect(rewards.every((rewardId: string) => rewardId === ids.acme.reward)).toBe(true);
    const theirs = await t.request('GET', `/api/v2/admin/rewards/${ids.beta.reward}/allocations`, asTenant(beta));
    expect(theirs.body.edges.every((allocation: { distributed: number }) => allocation.distributed === 0)).toBe(true);
  });

  it('3. an allocation supply past what the read models count is a 400', async () => {
    const huge = { rewardsConfig: { amountToDistribute: 1, allocations: [{ rewardId: ids.acme.reward, supply: 2 ** 53 - 1 }] } };
    const response = await refused(() => post(acme, `/games/${ids.acme.game}/distribution`, { distributions: [huge] }));
    expect(response.body.issues[0].path).toEqual(['distributions', 0, 'rewardsConfig', 'allocations', 0, 'supply']);
  });

  it('4. a challenge with an invalid field inside an action’s details is a 400 naming it', async () => {
    const body = visitChallenge(ids.acme.community, { id: 'c'.repeat(24), rewardId: ids.acme.reward });
    body.actions[0]!.details = { en: { ...block('Visit'), title: 'x'.repeat(201) } };
    const response = await refused(() => post(acme, '/challenges', body));
    expect(response.body.issues.map((issue: { path: unknown[] }) => issue.path.join('.'))).toEqual(['actions.0.details.en.title']);
  });

  it('5. a distribution naming an allocation that has handed out units works (its stream carries the hand-outs)', async () => {
    // Hand a unit out of the endpoint-created allocation (AllocationCreated, then the engine's AllocationDistributed).
    const challenge = await post(acme, '/challenges', visitChallenge(ids.acme.community, { id: ids.acme.allocation, rewardId: ids.acme.reward }));
    expect(challenge.status, JSON.stringify(challenge.body)).toBe(201);
    const member = await adminOf(t, acme).user('visitor', [ids.acme.community]);
    await t.settle();
    await post(acme, '/events/custom', { eventName: 'visit', userId: member.id, communityId: ids.acme.community });
    await t.settle();
    const allocations = await t.request('GET', `/api/v2/admin/rewards/${ids.acme.reward}/allocations`, asTenant(acme));
    expect(allocations.body.edges.find((a: { id: string }) => a.id === ids.acme.allocation).distributed).toBeGreaterThan(0);
    const again = { rewardsConfig: { amountToDistribute: 1, allocations: [{ id: ids.acme.allocation, rewardId: ids.acme.reward, supply: 10 }] } };
    expect((await post(acme, `/games/${ids.acme.game}/distribution`, { distributions: [again] })).status).toBe(200);
  });

  it('6. the documents list 409 on every idempotent route and 404 on every route with a path id', async () => {
    const document = (await t.request('GET', '/api/v2/admin/openapi.json')).body;
    const first = await post(acme, '/communities', { name: 'Once' }, { 'idempotency-key': 'findings-1' });
    expect(first.status).toBe(201);
    const reused = await refused(() => post(acme, '/communities', { name: 'Twice' }, { 'idempotency-key': 'findings-1' }), 409);
    expect(reused.body.code).toBe('CONFLICT');
    expect(Object.keys(document.paths['/communities'].post.responses)).toContain('409');
    const missing = await refused(() => t.request('PATCH', `/api/v2/admin/communities/${'f'.repeat(24)}`, { ...asTenant(acme), body: { name: 'X' } }), 404);
    expect(missing.body.code).toBe('NOT_FOUND');
    expect(Object.keys(document.paths['/communities/{communityId}'].patch.responses)).toContain('404');
  });
});
