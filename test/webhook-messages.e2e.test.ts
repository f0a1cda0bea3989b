import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WEBHOOK_EVENT_TYPES } from '../domain/webhook.ts';
import { runProgramme, type Programme } from './support/programme.ts';
import { asTenant } from './support/service.ts';
import { startReceiver, type Receiver } from './support/webhook-receiver.ts';

const HOOKS = '/api/v2/admin/webhooks';

/**
 * What is sent, on the whole programme of `support/programme.ts`: an endpoint subscribed to everything,
 * registered after the fact and replayed from the start of the log, gets every public type, each message
 * signed, its achievements the very ones `GET /integration/achievements` lists; then the second week, live.
 */
describe('webhook messages of the programme', () => {
  let p: Programme;
  let receiver: Receiver;
  let hook: { id: string; secret: string };

  /** Runs due jobs and lets the projections catch up until no delivery is pending. */
  const deliverAll = async () => {
    for (let round = 0; round < 20; round++) {
      await p.t.settle();
      await p.t.service.jobs.runDue();
      await p.t.settle();
      const pending = await p.t.request('GET', `${HOOKS}/${hook.id}/deliveries?outcome=pending`, asTenant(p.acme));
      if (pending.body.totalCount === 0) return;
    }
    throw new Error('deliveries still pending after 20 rounds');
  };
  const achievementsOf = async (member: Programme['users']['u1']) => {
    const response = await p.t.request('GET', '/api/v2/integration/achievements?limit=100', asTenant(p.acme, { authorization: `Bearer ${member.token}` }));
    return response.body.edges as { id: string }[];
  };

  beforeAll(async () => {
    p = await runProgramme({ WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'true' });
    receiver = await startReceiver();
    const created = await p.t.request('POST', HOOKS, { ...asTenant(p.acme), body: { url: receiver.url, eventTypes: ['*'] } });
    expect(created.status).toBe(201);
    hook = created.body;
    // u1 claims and redeems the coffee code of the first run before the replay.
    const assets = await p.t.request('GET', '/api/v2/integration/me/reward-assets', asTenant(p.acme, { authorization: `Bearer ${p.users.u1.token}` }));
    const asset = (assets.body.edges as { id: string; rewardId: string }[]).at(-1)!;
    const as = asTenant(p.acme, { authorization: `Bearer ${p.users.u1.token}` });
    expect((await p.t.request('POST', `/api/v2/integration/me/reward-assets/${asset.id}/claim`, { ...as, body: {} })).status).toBe(200);
    expect((await p.t.request('POST', `/api/v2/integration/me/reward-assets/${asset.id}/redeem`, { ...as, body: {} })).status).toBe(200);
    await deliverAll();
    expect(receiver.received).toHaveLength(2);
    const replay = await p.t.request('POST', `${HOOKS}/${hook.id}/replay`, { ...asTenant(p.acme), body: {} });
    expect(replay.status).toBe(202);
    await deliverAll();
  }, 180_000);
  afterAll(async () => {
    await receiver?.close();
    await p?.t.close();
  });

  it('sends every public type, each signed, with the stable envelope', () => {
    expect(new Set(receiver.received.map((entry) => entry.json.type))).toEqual(new Set(WEBHOOK_EVENT_TYPES));
    for (const entry of receiver.received) {
      expect(receiver.verify(hook.secret, entry)).toEqual(entry.json);
      expect(Object.keys(entry.json)).toEqual(['type', 'timestamp', 'data']);
      expect(entry.json.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    }
  });

  it('tells of the organisation’s own facts only, each once per replay', () => {
    const replayed = receiver.received.slice(2);
    expect(replayed.filter((entry) => entry.json.type === 'custom_event.logged')).toHaveLength(11);
    expect(JSON.stringify(receiver.received)).not.toContain(p.betaUser.id);
    expect(new Set(replayed.map((entry) => entry.headers['webhook-id'])).size).toBe(replayed.length);
    // The claim and redemption, sent live first, come again with their webhook-id.
    const live = receiver.received.slice(0, 2).map((entry) => entry.headers['webhook-id']);
    expect(replayed.map((entry) => entry.headers['webhook-id'])).toEqual(expect.arrayContaining(live));
  });

  it('carries the figures a receiver acts on', () => {
    const ofType = (type: string) => receiver.received.filter((entry) => entry.json.type === type).map((entry) => entry.json.data);
    expect(ofType('giveaway.drawn')).toEqual([
      expect.objectContaining({ rewardId: p.giveawayId, entrantCount: 3, totalEntries: 5, winners: [expect.objectContaining({ userId: expect.any(String) })] }),
    ]);
    const closed = ofType('leaderboard.window_closed').find((data) => data.leaderboardId === p.leaderboards.weekly)!;
    expect(closed).toMatchObject({ leaderboardName: 'Coffee champions', rankedCount: 3, windowEnd: '2027-03-08T00:00:00.000Z' });
    expect(closed.standings[0]).toMatchObject({ rank: 1, userId: p.users.u1.id, score: 100 });
    expect(ofType('reward_asset.redeemed')[0]).toMatchObject({ userId: p.users.u1.id, rewardId: expect.stringMatching(/^[0-9a-f]{24}$/) });
    expect(
      ofType('points.awarded')
        .filter((data) => data.source.kind === 'leaderboard' && data.userId === p.users.u1.id)
        .map((data) => data.amount),
    ).toEqual([100, 10]);
    expect(
      ofType('streak.extended')
        .filter((data) => data.userId === p.users.u1.id)
        .map((data) => data.currentStreak),
    ).toEqual([1, 2, 3]);
  });

  it('sends the achievements `GET /integration/achievements` lists, with their ids', async () => {
    const sent = receiver.received
      .slice(2)
      .filter((entry) => entry.json.type === 'achievement.earned')
      .map((entry) => entry.json.data);
    const listed = [...(await achievementsOf(p.users.u1)), ...(await achievementsOf(p.users.u2)), ...(await achievementsOf(p.users.u3))];
    expect(sent.map((data) => data.id).sort()).toEqual(listed.map((achievement) => achievement.id).sort());
    for (const achievement of listed as ({ id: string; organisationId: string; communityId: string } & Record<string, unknown>)[]) {
      const { organisationId: _organisationId, communityId, ...rest } = achievement;
      const data = sent.find((candidate) => candidate.id === achievement.id)!;
      // A placing on a leaderboard without a community condition has no community in the message (see the README).
      expect(data).toEqual({ ...rest, communityId: data.type === 'leaderboard-placing' && data.communityId === null ? null : communityId });
    }
  });

  it('places the second week live, as the achievements read model does', async () => {
    const before = receiver.received.length;
    p.clock.set('2027-03-09T09:00:00Z');
    await p.admin.post('/events/custom', { eventName: 'visit', userId: p.users.u2.id, communityId: p.communities.coffee, payload: {} });
    p.clock.set('2027-03-15T00:01:00Z');
    await p.t.settle();
    await p.t.service.jobs.runDue();
    await deliverAll();
    const placings = receiver.received
      .slice(before)
      .filter((entry) => entry.json.type === 'achievement.earned' && entry.json.data.type === 'leaderboard-placing')
      .map((entry) => entry.json.data);
    expect(placings.length).toBeGreaterThan(0);
    const listed = (await achievementsOf(p.users.u2)).filter(
      (achievement) => (achievement as { windowStart?: string }).windowStart === '2027-03-08T00:00:00.000Z',
    );
    expect(
      placings
        .filter((data) => data.userId === p.users.u2.id)
        .map((data) => data.id)
        .sort(),
    ).toEqual(listed.map((achievement) => achievement.id).sort());
  });
});
