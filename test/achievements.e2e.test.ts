import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idFrom } from '../infra/ids.ts';
import { asTenant } from './support/service.ts';
import { runProgramme, type Member, type Programme } from './support/programme.ts';

const ACHIEVEMENTS = '/api/v2/integration/achievements';

/**
 * `GET /integration/achievements` on the programme of `support/programme.ts`; every expected record is
 * derived by hand there (days, runs, ranks, scores, the communities pay-outs go to).
 */
describe('GET /integration/achievements', () => {
  let p: Programme;
  const get = (member: Member, query = '', tenant = p.acme) =>
    p.t.request('GET', `${ACHIEVEMENTS}${query}`, asTenant(tenant, { authorization: `Bearer ${member.token}` }));

  beforeAll(async () => {
    p = await runProgramme();
  }, 120_000);
  afterAll(async () => {
    await p.t.close();
  });

  const earned = (member: Member, communityId: string, earnedAt: string) => ({
    organisationId: p.acme.organisationId,
    userId: member.id,
    communityId,
    earnedAt,
  });
  const completion = (member: Member, challenge: 'coffee' | 'tea', run: number, earnedAt: string) => ({
    type: 'challenge-completed',
    id: expect.stringMatching(/^[0-9a-f]{24}$/),
    ...earned(member, p.communities[challenge], earnedAt),
    challengeId: p.challenges[challenge],
    run,
  });
  const placing = (member: Member, board: 'weekly' | 'allClubs', communityId: string, rank: number, score: number) => ({
    type: 'leaderboard-placing',
    id: expect.stringMatching(/^[0-9a-f]{24}$/),
    ...earned(member, communityId, '2027-03-08T00:00:00.000Z'),
    leaderboardId: p.leaderboards[board],
    leaderboardName: board === 'weekly' ? 'Coffee champions' : 'Busiest members',
    windowStart: '2027-03-01T00:00:00.000Z',
    windowEnd: '2027-03-08T00:00:00.000Z',
    rank,
    score,
  });

  it('serves every achievement the user earned, each field with its type, newest first', async () => {
    const response = await get(p.users.u1, '?limit=100');
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    expect(Object.keys(response.body)).toEqual(['totalCount', 'edges']);
    const { coffee } = p.communities;
    // Two runs of coffee, a three-day streak on Wednesday, rank 1 of both leaderboards (u1 was last active in coffee).
    expect(response.body.totalCount).toBe(5);
    const [first, second, ...older] = response.body.edges as { id: string }[];
    // The two placings share earnedAt (the window's end): the larger id comes first.
    expect([first, second]).toEqual(expect.arrayContaining([placing(p.users.u1, 'weekly', coffee, 1, 100), placing(p.users.u1, 'allClubs', coffee, 1, 5)]));
    expect(first!.id > second!.id).toBe(true);
    expect(older).toEqual([
      {
        type: 'streak-milestone',
        id: expect.stringMatching(/^[0-9a-f]{24}$/),
        ...earned(p.users.u1, coffee, '2027-03-03T09:00:00.000Z'),
        streakDays: 3,
      },
      completion(p.users.u1, 'coffee', 2, '2027-03-02T09:05:00.000Z'),
      completion(p.users.u1, 'coffee', 1, '2027-03-01T09:05:00.000Z'),
    ]);
    const keys = {
      'challenge-completed': ['type', 'id', 'organisationId', 'userId', 'communityId', 'earnedAt', 'challengeId', 'run'],
      'streak-milestone': ['type', 'id', 'organisationId', 'userId', 'communityId', 'earnedAt', 'streakDays'],
      'leaderboard-placing': [
        'type',
        'id',
        'organisationId',
        'userId',
        'communityId',
        'earnedAt',
        'leaderboardId',
        'leaderboardName',
        'windowStart',
        'windowEnd',
        'rank',
        'score',
      ],
    };
    for (const record of response.body.edges as Record<string, unknown>[]) expect(Object.keys(record)).toEqual(keys[record.type as keyof typeof keys]);
  });

  it('places a rank in the community its reward went to: the leaderboard’s, else where the user was last active', async () => {
    const u2 = await get(p.users.u2);
    expect(u2.body.edges).toEqual([
      placing(p.users.u2, 'weekly', p.communities.coffee, 2, 45),
      completion(p.users.u2, 'coffee', 1, '2027-03-02T10:05:00.000Z'),
    ]);
    // u3: rank 3 of weekly is outside its ranges; rank 2 of allClubs lands in tea, where u3 brewed last.
    const u3 = await get(p.users.u3);
    expect(u3.body.edges).toEqual([
      placing(p.users.u3, 'allClubs', p.communities.tea, 2, 3),
      completion(p.users.u3, 'tea', 2, '2027-03-04T08:00:00.000Z'),
      completion(p.users.u3, 'tea', 1, '2027-03-03T11:30:00.000Z'),
    ]);
  });

  it('ids are stable: derived from the fact that earned them', async () => {
    const events = await p.t.service.store.readAll({ filter: { eventTypes: ['ChallengeCompleted'] }, limit: 1000 });
    const cause = events.events.find((event) => (event.data as { userId: string; run: number }).userId === p.users.u2.id)!;
    const [, completed] = (await get(p.users.u2)).body.edges;
    expect(completed.id).toBe(idFrom(`achievement:${cause.id}`));
  });

  it('filters by type and by community, combined', async () => {
    const streaks = await get(p.users.u1, '?type=streak-milestone');
    expect(streaks.body).toEqual({ totalCount: 1, edges: [expect.objectContaining({ type: 'streak-milestone', streakDays: 3 })] });
    const placings = await get(p.users.u1, '?type=leaderboard-placing');
    expect(placings.body.totalCount).toBe(2);
    expect(placings.body.edges.every((record: { type: string }) => record.type === 'leaderboard-placing')).toBe(true);
    const inTea = await get(p.users.u3, `?communityId=${p.communities.tea.toUpperCase()}`);
    expect(inTea.body.totalCount).toBe(3);
    const inCoffee = await get(p.users.u3, `?communityId=${p.communities.coffee}`);
    expect(inCoffee.body).toEqual({ totalCount: 0, edges: [] });
    const both = await get(p.users.u3, `?communityId=${p.communities.tea}&type=challenge-completed`);
    expect(both.body.edges.map((record: { run: number }) => record.run)).toEqual([2, 1]);
  });

  it('paginates: limit 1..100 (default 10), skip >= 0; out of range is a 400 with issues', async () => {
    const page = await get(p.users.u1, '?limit=2&skip=1');
    expect(page.body.totalCount).toBe(5);
    expect(page.body.edges).toHaveLength(2);
    const all = (await get(p.users.u1)).body.edges;
    expect(all).toHaveLength(5);
    expect(page.body.edges).toEqual(all.slice(1, 3));
    expect((await get(p.users.u1, '?skip=4')).body.edges).toEqual(all.slice(4));
    expect((await get(p.users.u1, '?skip=5')).body).toEqual({ totalCount: 5, edges: [] });
    for (const query of ['?limit=0', '?limit=101', '?skip=-1', '?limit=2.5', '?limit=ten', '?type=badge', '?communityId=nope']) {
      const response = await get(p.users.u1, query);
      expect(response.status, query).toBe(400);
      expect(response.body.code).toBe('BAD_REQUEST');
      expect(response.body.issues.length, query).toBeGreaterThan(0);
    }
  });

  it('404 for a community the organisation does not have', async () => {
    const response = await get(p.users.u1, '?communityId=ffffffffffffffffffffffff');
    expect(response.status).toBe(404);
    expect(response.body.code).toBe('NOT_FOUND');
  });

  it('a user only ever sees their own; 401 without a user token or an API token; 403 without the integration family', async () => {
    for (const member of Object.values(p.users)) {
      const edges = (await get(member, '?limit=100')).body.edges as { userId: string }[];
      expect(edges.length).toBeGreaterThan(0);
      expect(edges.every((record) => record.userId === member.id)).toBe(true);
    }
    // Beta's user, on Beta's domain: nothing of Acme's; Beta's user token on Acme's domain is refused.
    expect((await get(p.betaUser, '', p.beta)).body).toEqual({ totalCount: 0, edges: [] });
    const foreign = await get(p.betaUser);
    expect(foreign.status).toBe(401);
    expect(foreign.body.code).toBe('UNAUTHORIZED');

    const withoutUser = await p.t.request('GET', ACHIEVEMENTS, asTenant(p.acme));
    expect(withoutUser.status).toBe(401);
    expect(withoutUser.body.code).toBe('UNAUTHORIZED');
    const withoutApiToken = await p.t.request('GET', ACHIEVEMENTS, { host: p.acme.domain, headers: { authorization: `Bearer ${p.users.u1.token}` } });
    expect(withoutApiToken.status).toBe(401);
    const adminOnly = await p.t.issueToken({ organisationId: p.acme.organisationId, name: 'admin only', families: ['admin'] });
    const forbidden = await p.t.request('GET', ACHIEVEMENTS, {
      host: p.acme.domain,
      headers: { 'x-api-token': adminOnly.token, authorization: `Bearer ${p.users.u1.token}` },
    });
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.code).toBe('FORBIDDEN');
  });

  it('counts them per community in the team member record (GET /admin/teams, /admin/users/{id}, /integration/me)', async () => {
    const communityData = (body: { communityData: { communityId: string; achievementsCompleted: number; challengesCompleted: number }[] }) =>
      Object.fromEntries(body.communityData.map((data) => [data.communityId, [data.achievementsCompleted, data.challengesCompleted]]));
    const { coffee, tea } = p.communities;
    const teams = await p.t.request('GET', '/api/v2/admin/teams?limit=100', asTenant(p.acme));
    expect(teams.status).toBe(200);
    const byId = new Map((teams.body.edges as { id: string }[]).map((member) => [member.id, communityData(member as never)]));
    expect(byId.get(p.users.u1.id)).toEqual({ [coffee]: [5, 2] });
    expect(byId.get(p.users.u2.id)).toEqual({ [coffee]: [2, 1] });
    expect(byId.get(p.users.u3.id)).toEqual({ [coffee]: [0, 0], [tea]: [3, 2] });
    expect(communityData((await p.t.request('GET', `/api/v2/admin/users/${p.users.u3.id}`, asTenant(p.acme))).body)).toEqual(byId.get(p.users.u3.id));
    const me = await p.t.request('GET', '/api/v2/integration/me', asTenant(p.acme, { authorization: `Bearer ${p.users.u1.token}` }));
    expect(communityData(me.body)).toEqual(byId.get(p.users.u1.id));
  });

  it('is described in the integration OpenAPI document', async () => {
    const document = (await p.t.request('GET', '/api/v2/integration/openapi.json', { host: p.acme.domain })).body;
    const operation = document.paths['/achievements'].get;
    expect(operation.description).toMatch(/streak-milestone/);
    expect(operation.parameters.map((parameter: { name: string }) => parameter.name)).toEqual(
      expect.arrayContaining(['limit', 'skip', 'type', 'communityId', 'Authorization']),
    );
    expect(operation.parameters.find((parameter: { name: string }) => parameter.name === 'type').schema.enum).toEqual([
      'challenge-completed',
      'streak-milestone',
      'leaderboard-placing',
    ]);
    expect(Object.keys(operation.responses)).toEqual(expect.arrayContaining(['200', '400', '401', '403', '404']));
    const achievement = document.components.schemas.Achievement;
    expect(achievement.oneOf.map((variant: { $ref: string }) => variant.$ref)).toEqual([
      '#/components/schemas/ChallengeCompletedAchievement',
      '#/components/schemas/StreakMilestoneAchievement',
      '#/components/schemas/LeaderboardPlacingAchievement',
    ]);
    expect(document.components.schemas.LeaderboardPlacingAchievement.required).toEqual(
      expect.arrayContaining(['leaderboardId', 'leaderboardName', 'windowStart', 'windowEnd', 'rank', 'score']),
    );
  });
});
