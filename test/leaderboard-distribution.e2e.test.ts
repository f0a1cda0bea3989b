import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, asTenant, type Tenant } from './support/service.ts';

const leaderboard = {
  name: 'Weekly XP',
  metricType: 'total-xp',
  startsAt: '2026-01-05T00:00:00Z',
  status: 'live',
  period: 'weekly',
};
const rewardId = 'c'.repeat(24);
const allocationId = 'd'.repeat(24);
const rewards = [
  {
    startRank: 4,
    endRank: 10,
    pointsToDistribute: 10,
    bonusXpToDistribute: 5,
    rewardsConfig: { amountToDistribute: 1, allocations: [{ rewardId, supply: 0, amountToDistribute: 1 }] },
  },
  {
    startRank: 1,
    endRank: 3,
    pointsToDistribute: 100.5,
    bonusXpToDistribute: 50,
    rewardsConfig: { amountToDistribute: 2, allocations: [{ id: allocationId, rewardId, supply: 30, amountToDistribute: 2 }] },
  },
];

describe('leaderboard rank-range distributions over HTTP', () => {
  let t: TestService;
  let acme: Tenant;
  let beta: Tenant;
  const asAcme = (extra: Record<string, string> = {}) => asTenant(acme, extra);
  const distribution = (id: string) => `/api/v2/admin/leaderboards/${id}/distribution`;
  // Per stream: other slices' process managers append to other streams in the background.
  const streamOf = (id: string) => t.service.store.readStream(`leaderboard-${id}`);

  async function createLeaderboard(body: Record<string, unknown> = {}) {
    const response = await t.request('POST', '/api/v2/admin/leaderboards', { ...asAcme(), body: { ...leaderboard, ...body } });
    expect(response.status).toBe(200);
    return response.body as Record<string, any>;
  }

  beforeAll(async () => {
    // No timed work: these leaderboards start and expire in the past, and the jobs would move their status under the test.
    t = await startTestService({ jobs: false });
    acme = await t.createOrganisation('acme');
    beta = await t.createOrganisation('beta');
  });
  afterAll(async () => {
    await t.close();
  });

  it('assigns rewards per rank range: 200 with the distribution by startRank, readable back from both GET routes', async () => {
    const created = await createLeaderboard();
    const response = await t.request('POST', distribution(created.id), { ...asAcme(), body: { rewards } });
    expect(response.status).toBe(200);
    const body = response.body;
    expect(Object.keys(body).sort()).toEqual(['leaderboardConfigId', 'rewards']);
    expect(body.leaderboardConfigId).toBe(created.id);
    expect(body.rewards).toHaveLength(2);
    const [top, rest] = body.rewards;
    expect(Object.keys(top).sort()).toEqual(['bonusXpToDistribute', 'distributionEventId', 'endRank', 'pointsToDistribute', 'rewardsConfig', 'startRank']);
    expect(top.startRank).toBe(1);
    expect(top.endRank).toBe(3);
    expect(top.pointsToDistribute).toBe(100.5);
    expect(top.bonusXpToDistribute).toBe(50);
    expect(top.distributionEventId).toMatch(/^[0-9a-f]{24}$/);
    expect(top.rewardsConfig).toEqual({
      amountToDistribute: 2,
      allocations: [{ id: allocationId, rewardId, supply: 30, amountToDistribute: 2, distributed: 0, isLive: true }],
    });
    expect(rest.startRank).toBe(4);
    expect(rest.endRank).toBe(10);
    expect(rest.pointsToDistribute).toBe(10);
    expect(rest.bonusXpToDistribute).toBe(5);
    expect(rest.distributionEventId).toMatch(/^[0-9a-f]{24}$/);
    expect(rest.distributionEventId).not.toBe(top.distributionEventId);
    expect(rest.rewardsConfig.amountToDistribute).toBe(1);
    const [generated] = rest.rewardsConfig.allocations;
    expect(generated.id).toMatch(/^[0-9a-f]{24}$/);
    expect(generated).toEqual({ id: generated.id, rewardId, supply: 0, amountToDistribute: 1, distributed: 0, isLive: false });
    expect(response.headers['x-event-position']).toMatch(/^[0-9a-f]{32}$/);

    const stored = await streamOf(created.id);
    expect(stored.map((event) => event.type)).toEqual(['LeaderboardCreated', 'LeaderboardRewardsAssigned']);
    expect(stored[1]!.data).toMatchObject({ leaderboardId: created.id, organisationId: acme.organisationId, assignedBy: created.createdBy });

    const minPosition = { 'x-min-position': response.headers['x-event-position'] as string };
    const read = await t.request('GET', distribution(created.id), asAcme(minPosition));
    expect(read.status).toBe(200);
    expect(read.body).toEqual(body);
    const config = await t.request('GET', `/api/v2/admin/leaderboards/${created.id}`, asAcme(minPosition));
    expect(config.body.rewardsConfig).toEqual([
      { startRank: 1, endRank: 3, distributionEventId: top.distributionEventId },
      { startRank: 4, endRank: 10, distributionEventId: rest.distributionEventId },
    ]);
    expect(config.body.updatedBy).toBe(created.createdBy);
    expect(Date.parse(config.body.updatedAt)).toBeGreaterThanOrEqual(Date.parse(created.createdAt));
    const list = await t.request('GET', '/api/v2/admin/leaderboards?limit=100', asAcme(minPosition));
    expect(list.body.edges.find((edge: { id: string }) => edge.id === created.id).rewardsConfig).toEqual(config.body.rewardsConfig);
  });

  it('applies the defaults of a distribution entry (amounts 0, no allocations)', async () => {
    const created = await createLeaderboard({ status: 'draft' });
    const response = await t.request('POST', distribution(created.id), { ...asAcme(), body: { rewards: [{ startRank: 1, endRank: 1 }] } });
    expect(response.status).toBe(200);
    expect(response.body.rewards).toEqual([
      {
        startRank: 1,
        endRank: 1,
        distributionEventId: response.body.rewards[0].distributionEventId,
        pointsToDistribute: 0,
        bonusXpToDistribute: 0,
        rewardsConfig: { amountToDistribute: 0, allocations: [] },
      },
    ]);
  });

  it('a new assignment replaces the whole distribution with new distributionEventIds; an empty one removes it', async () => {
    const created = await createLeaderboard({ status: 'scheduled' });
    const first = await t.request('POST', distribution(created.id), { ...asAcme(), body: { rewards } });
    const second = await t.request('POST', distribution(created.id), { ...asAcme(), body: { rewards: [{ ...rewards[1], endRank: 2 }] } });
    expect(second.status).toBe(200);
    expect(second.body.rewards).toHaveLength(1);
    expect(second.body.rewards[0]).toMatchObject({ startRank: 1, endRank: 2 });
    expect(first.body.rewards.map((reward: { distributionEventId: string }) => reward.distributionEventId)).not.toContain(
      second.body.rewards[0].distributionEventId,
    );
    const read = await t.request('GET', distribution(created.id), asAcme({ 'x-min-position': second.headers['x-event-position'] as string }));
    expect(read.body).toEqual(second.body);

    const cleared = await t.request('POST', distribution(created.id), { ...asAcme(), body: { rewards: [] } });
    expect(cleared.status).toBe(200);
    expect(cleared.body).toEqual({ leaderboardConfigId: created.id, rewards: [] });
    const minPosition = { 'x-min-position': cleared.headers['x-event-position'] as string };
    expect((await t.request('GET', distribution(created.id), asAcme(minPosition))).body).toEqual(cleared.body);
    expect((await t.request('GET', `/api/v2/admin/leaderboards/${created.id}`, asAcme(minPosition))).body.rewardsConfig).toEqual([]);
  });

  it('a leaderboard without a distribution reads as an empty one', async () => {
    const created = await t.request('POST', '/api/v2/admin/leaderboards', { ...asAcme(), body: leaderboard });
    const read = await t.request('GET', distribution(created.body.id), asAcme({ 'x-min-position': created.headers['x-event-position'] as string }));
    expect(read.status).toBe(200);
    expect(read.body).toEqual({ leaderboardConfigId: created.body.id, rewards: [] });
  });

  const entry = rewards[1]!;
  const invalid: [string, unknown, string][] = [
    ['rewards missing', {}, 'rewards'],
    ['rewards not an array', { rewards: entry }, 'rewards'],
    ['a body that is not an object', [entry], ''],
    ['startRank missing', { rewards: [{ ...entry, startRank: undefined }] }, 'rewards.0.startRank'],
    ['endRank missing', { rewards: [{ ...entry, endRank: undefined }] }, 'rewards.0.endRank'],
    ['startRank 0', { rewards: [{ ...entry, startRank: 0 }] }, 'rewards.0.startRank'],
    ['endRank 0', { rewards: [{ ...entry, endRank: 0 }] }, 'rewards.0.endRank'],
    ['startRank not an integer', { rewards: [{ ...entry, startRank: 1.5 }] }, 'rewards.0.startRank'],
    ['endRank a string', { rewards: [{ ...entry, endRank: '3' }] }, 'rewards.0.endRank'],
    ['endRank before startRank', { rewards: [{ ...entry, startRank: 5, endRank: 4 }] }, 'rewards.0.endRank'],
    ['overlapping ranges', { rewards: [entry, { ...rewards[0], startRank: 3 }] }, 'rewards.1.startRank'],
    ['pointsToDistribute negative', { rewards: [{ ...entry, pointsToDistribute: -1 }] }, 'rewards.0.pointsToDistribute'],
    ['bonusXpToDistribute negative', { rewards: [{ ...entry, bonusXpToDistribute: -1 }] }, 'rewards.0.bonusXpToDistribute'],
    [
      'allocation rewardId not 24 hex',
      { rewards: [{ ...entry, rewardsConfig: { allocations: [{ rewardId: 'xyz', supply: 1 }] } }] },
      'rewards.0.rewardsConfig.allocations.0.rewardId',
    ],
    [
      'allocation supply negative',
      { rewards: [{ ...entry, rewardsConfig: { allocations: [{ rewardId, supply: -1 }] } }] },
      'rewards.0.rewardsConfig.allocations.0.supply',
    ],
    [
      'one allocation id twice',
      { rewards: [entry, { ...rewards[0], rewardsConfig: { allocations: [{ id: allocationId, rewardId, supply: 1 }] } }] },
      'rewards.1.rewardsConfig.allocations.0.id',
    ],
    ['more than 100 ranges', { rewards: Array.from({ length: 101 }, (_, i) => ({ startRank: i + 1, endRank: i + 1 })) }, 'rewards'],
  ];

  it.each(invalid)('%s → 400 with issues, and no event appended', async (_case, body, path) => {
    const created = await createLeaderboard();
    const response = await t.request('POST', distribution(created.id), { ...asAcme(), body });
    expect(response.status).toBe(400);
    expect(response.body.code).toBe('BAD_REQUEST');
    expect(response.body.message).toBe('Invalid input data');
    expect(response.body.issues.length).toBeGreaterThan(0);
    expect(response.body.issues.map((issue: { path: unknown[] }) => issue.path.join('.'))).toContain(path);
    expect(await streamOf(created.id)).toHaveLength(1);
  });

  it('names both entries of an overlap in the issue', async () => {
    const created = await createLeaderboard();
    const response = await t.request('POST', distribution(created.id), { ...asAcme(), body: { rewards: [entry, { ...rewards[0], startRank: 3 }] } });
    expect(response.status).toBe(400);
    expect(response.body.issues).toEqual([
      { path: ['rewards', 1, 'startRank'], message: 'rewards.1.startRank: rewards.1 (ranks 3-10) overlaps rewards.0 (ranks 1-3)' },
    ]);
  });

  it.each([['archived'], ['expired']])('a leaderboard that is %s refuses a new distribution → 409, nothing appended', async (status) => {
    const created = await createLeaderboard({ status });
    const response = await t.request('POST', distribution(created.id), { ...asAcme(), body: { rewards } });
    expect(response.status).toBe(409);
    expect(response.body).toEqual({ code: 'CONFLICT', message: `A leaderboard that is ${status} accepts no new distribution` });
    expect(await streamOf(created.id)).toHaveLength(1);
  });

  it('a leaderboard archived after its distribution keeps it readable but refuses a new one', async () => {
    const created = await createLeaderboard();
    const assigned = await t.request('POST', distribution(created.id), { ...asAcme(), body: { rewards } });
    const archived = await t.request('PATCH', `/api/v2/admin/leaderboards/${created.id}`, { ...asAcme(), body: { status: 'archived' } });
    expect(archived.status).toBe(200);
    expect(archived.body.rewardsConfig).toHaveLength(2);
    const refused = await t.request('POST', distribution(created.id), { ...asAcme(), body: { rewards: [] } });
    expect(refused.status).toBe(409);
    const read = await t.request('GET', distribution(created.id), asAcme({ 'x-min-position': archived.headers['x-event-position'] as string }));
    expect(read.body).toEqual(assigned.body);
  });

  it('an unknown id, a malformed id or another organisation’s leaderboard → 404 on POST and GET, nothing appended', async () => {
    const created = await t.request('POST', '/api/v2/admin/leaderboards', { ...asAcme(), body: leaderboard });
    const position = created.headers['x-event-position'] as string;
    const asBeta = { host: beta.domain, headers: { 'x-api-token': beta.token, 'x-min-position': position } };
    for (const id of ['f'.repeat(24), 'not-an-id']) {
      const posted = await t.request('POST', distribution(id), { ...asAcme(), body: { rewards } });
      expect(posted.status, id).toBe(404);
      expect(posted.body.code).toBe('NOT_FOUND');
      const read = await t.request('GET', distribution(id), asAcme({ 'x-min-position': position }));
      expect(read.status, id).toBe(404);
      expect(read.body.code).toBe('NOT_FOUND');
    }
    const foreignPost = await t.request('POST', distribution(created.body.id), { ...asBeta, body: { rewards } });
    expect(foreignPost.status).toBe(404);
    expect(foreignPost.body.code).toBe('NOT_FOUND');
    const foreignRead = await t.request('GET', distribution(created.body.id), asBeta);
    expect(foreignRead.status).toBe(404);
    expect(await streamOf(created.body.id)).toHaveLength(1);
    expect(await streamOf('f'.repeat(24))).toHaveLength(0);
  });

  it('without a token → 401 on POST and GET, nothing appended', async () => {
    const created = await createLeaderboard();
    const posted = await t.request('POST', distribution(created.id), { host: acme.domain, body: { rewards } });
    expect(posted.status).toBe(401);
    expect(posted.body.code).toBe('UNAUTHORIZED');
    const read = await t.request('GET', distribution(created.id), { host: acme.domain });
    expect(read.status).toBe(401);
    expect(read.body.code).toBe('UNAUTHORIZED');
    expect(await streamOf(created.id)).toHaveLength(1);
  });

  it('50 parallel assignments: each applied once (200) or refused (409), the stream contiguous, the read model showing the last', async () => {
    const created = await createLeaderboard();
    const bodies = Array.from({ length: 50 }, (_, i) => ({
      rewards: [
        { startRank: 1, endRank: i + 1, pointsToDistribute: i, bonusXpToDistribute: 0, rewardsConfig: { amountToDistribute: 0, allocations: [] } },
        { startRank: i + 2, endRank: 100, pointsToDistribute: 0, bonusXpToDistribute: i, rewardsConfig: { amountToDistribute: 0, allocations: [] } },
      ],
    }));
    const answers = await Promise.all(bodies.map((body) => t.request('POST', distribution(created.id), { ...asAcme(), body })));
    for (const answer of answers) expect([200, 409]).toContain(answer.status);
    const applied = answers.filter((answer) => answer.status === 200);
    expect(applied.length).toBeGreaterThan(0);
    for (const answer of answers.filter((a) => a.status === 409)) expect(answer.body.code).toBe('CONFLICT');

    const stream = await streamOf(created.id);
    expect(stream.filter((event) => event.type === 'LeaderboardRewardsAssigned')).toHaveLength(applied.length);
    expect(stream.map((event) => Number(event.revision))).toEqual(stream.map((_, i) => i));
    // Each 200 is one event: its distributionEventIds appear in exactly one event of the stream.
    const eventIds = stream.slice(1).map((event) => (event.data as { rewards: { distributionEventId: string }[] }).rewards[0]!.distributionEventId);
    expect(new Set(eventIds).size).toBe(applied.length);
    expect(applied.map((answer) => answer.body.rewards[0].distributionEventId).sort()).toEqual([...eventIds].sort());

    const last = stream.at(-1)!;
    const highest = answers
      .map((answer) => answer.headers['x-event-position'] as string | undefined)
      .filter((position): position is string => position !== undefined)
      .sort()
      .at(-1)!;
    expect(highest).toBe(last.position);
    const read = await t.request('GET', distribution(created.id), asAcme({ 'x-min-position': highest }));
    expect(read.status).toBe(200);
    const lastAnswer = applied.find((answer) => answer.headers['x-event-position'] === last.position)!;
    expect(read.body).toEqual(lastAnswer.body);
    const lastBody = bodies[answers.indexOf(lastAnswer)]!;
    expect(read.body.rewards.map((reward: { startRank: number; endRank: number }) => [reward.startRank, reward.endRank])).toEqual(
      lastBody.rewards.map((reward) => [reward.startRank, reward.endRank]),
    );
    expect(read.body.rewards.map((reward: { pointsToDistribute: number }) => reward.pointsToDistribute)).toEqual(
      lastBody.rewards.map((reward) => reward.pointsToDistribute),
    );
  });
});
