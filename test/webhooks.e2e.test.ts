import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from './support/clock.ts';
import { waitUntil } from './support/projections.ts';
import { adminOf, block } from './support/programme.ts';
import { asTenant, startTestService, type Tenant, type TestService } from './support/service.ts';
import { startReceiver, type Receiver } from './support/webhook-receiver.ts';

const HOOKS = '/api/v2/admin/webhooks';

/**
 * Webhooks end to end, against real HTTP receivers on local ports: the service runs its projectors and its
 * jobs (BullMQ when TEST_REDIS_URL is set) on a clock the test moves to make retries due.
 */
describe('webhooks', () => {
  const clock = new ManualClock(new Date().toISOString());
  let t: TestService;
  let acme: Tenant;
  let beta: Tenant;
  let admin: ReturnType<typeof adminOf>;
  let community: string;
  let rewardId: string;
  const receivers: Receiver[] = [];

  const receiver = async (...args: Parameters<typeof startReceiver>) => {
    const started = await startReceiver(...args);
    receivers.push(started);
    return started;
  };
  const createHook = async (url: string, eventTypes: string[], tenant = acme) => {
    const response = await t.request('POST', HOOKS, { ...asTenant(tenant), body: { url, eventTypes } });
    expect(response.status, JSON.stringify(response.body)).toBe(201);
    return { ...response.body, position: response.headers['x-event-position'] as string } as { id: string; secret: string; position: string };
  };
  const deliveries = async (webhookId: string, query = '') => {
    await t.settle();
    const response = await t.request('GET', `${HOOKS}/${webhookId}/deliveries?limit=100${query}`, asTenant(acme));
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    return response.body.edges as any[];
  };
  /** A member who completes the challenge (once a day each): achievement, points, XP and an asset. */
  const completeChallenge = async (externalUserId: string) => {
    const member = await admin.user(externalUserId, [community]);
    await admin.post('/events/custom', { eventName: 'visit', userId: member.id, communityId: community, payload: { store: 'north' } });
    return member;
  };

  beforeAll(async () => {
    t = await startTestService({ clock, env: { WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'true' }, jobOptions: { pollMs: 100 } });
    acme = await t.createOrganisation('hooks');
    beta = await t.createOrganisation('hooks-beta');
    admin = adminOf(t, acme);
    community = await admin.community('Club');
    rewardId = (
      await admin.post('/rewards', {
        kind: 'asset',
        communityId: community,
        details: { en: block('Mug') },
        redeemable: { redeemByDate: '2999-01-01T00:00:00Z' },
        codes: Array.from({ length: 20 }, (_, i) => `MUG-${i + 1}`),
        expiresAt: null,
      })
    ).id;
    const allocationId = (await admin.post(`/rewards/${rewardId}/allocations`, { supply: 20, amountToDistribute: 1 })).id;
    const now = clock.now().getTime();
    await admin.post('/challenges', {
      communityId: community,
      details: { en: block('Visit') },
      actions: [{ key: 'visit', category: 'participation', criteria: [], xp: 10, isSkippable: false, details: { en: block('visit') } }],
      isLinear: false,
      maxCompletionsPerPeriod: 1,
      period: 'daily',
      startsAt: new Date(now - 86_400_000).toISOString(),
      expiresAt: new Date(now + 30 * 86_400_000).toISOString(),
      rewardDistribution: { points: 50, xp: 15, rewardAllocations: [{ rewardId, allocationId, amountToDistribute: 1 }], numberOfRewardsToReceive: 1 },
    });
  }, 60_000);
  afterAll(async () => {
    await Promise.all(receivers.map((started) => started.close()));
    await t?.close();
  });

  it('sends signed achievement and reward asset messages for a completed challenge, and nothing it was not asked for', async () => {
    const hooks = await receiver();
    const hook = await createHook(hooks.url, ['achievement.earned', 'reward_asset.*']);
    expect(hook.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const member = await completeChallenge('complete-1');

    const mine = () => hooks.received.filter((entry) => entry.json.data.userId === member.id);
    await waitUntil(() => mine().length >= 2, 20_000, 'the achievement and the asset');
    for (const entry of mine()) {
      expect(hooks.verify(hook.secret, entry)).toEqual(entry.json);
      expect(entry.headers['webhook-id']).toMatch(/^msg_[0-9a-f]{24}$/);
      expect(entry.headers['content-type']).toBe('application/json');
    }
    const achievement = mine().find((entry) => entry.json.type === 'achievement.earned')!;
    expect(achievement.json.data).toMatchObject({ type: 'challenge-completed', userId: member.id, communityId: community, run: 1 });
    const granted = mine().find((entry) => entry.json.type === 'reward_asset.granted')!;
    expect(granted.json.data).toMatchObject({ rewardId, userId: member.id, communityId: community, code: expect.stringMatching(/^MUG-/) });
    expect(Object.keys(granted.json)).toEqual(['type', 'timestamp', 'data']);
    // The event, the action, the points and the XP are not subscribed to: never sent.
    expect(new Set(hooks.received.map((entry) => entry.json.type))).toEqual(new Set(['achievement.earned', 'reward_asset.granted']));

    // The member claims the asset: `reward_asset.*` covers the claim, which names the reward.
    const claim = await t.request('POST', `/api/v2/integration/me/reward-assets/${granted.json.data.assetId}/claim`, {
      ...asTenant(acme, { authorization: `Bearer ${member.token}` }),
      body: {},
    });
    expect(claim.status, JSON.stringify(claim.body)).toBe(200);
    await waitUntil(() => hooks.ofType('reward_asset.claimed').length === 1, 20_000, 'the claim');
    expect(hooks.ofType('reward_asset.claimed')[0]!.json.data).toMatchObject({ assetId: granted.json.data.assetId, rewardId, userId: member.id });

    // The receiver answered before the attempts were recorded: wait for the log to say so.
    await waitUntil(async () => (await deliveries(hook.id)).every((delivery) => delivery.outcome === 'succeeded'), 20_000, 'the attempts recorded');
    const log = await deliveries(hook.id);
    expect(log).toHaveLength(3);
    expect(log.every((delivery) => delivery.attemptCount === 1 && delivery.lastStatusCode === 200)).toBe(true);
  });

  it('retries a receiver that fails twice with the same webhook-id, and the delivery log shows each attempt', async () => {
    const failures = new Map<string, number>();
    const hooks = await receiver((entry) => {
      if (entry.json.data.name !== 'retry-me') return 200;
      const seen = (failures.get(entry.headers['webhook-id'] as string) ?? 0) + 1;
      failures.set(entry.headers['webhook-id'] as string, seen);
      return seen <= 2 ? 500 : 200;
    });
    const hook = await createHook(hooks.url, ['custom_event.logged']);
    const member = await admin.user('retry-1', [community]);
    await admin.post('/events/custom', { eventName: 'retry-me', userId: member.id, communityId: community, payload: { amount: 3 } });
    const tries = () => hooks.received.filter((entry) => entry.json.data.name === 'retry-me');

    await waitUntil(() => tries().length === 1, 20_000, 'the first attempt');
    const pending = async () => (await deliveries(hook.id)).find((delivery) => delivery.payload.data.name === 'retry-me');
    await waitUntil(async () => (await pending())?.attemptCount === 1, 20_000, 'the first attempt recorded');
    const afterFirst = await pending();
    expect(afterFirst).toMatchObject({ outcome: 'pending', lastStatusCode: 500, lastError: 'HTTP 500' });
    // Retried after 10 s, give or take 20%: not before the clock gets there.
    const wait = Date.parse(afterFirst.nextAttemptAt) - Date.parse(afterFirst.lastAttemptAt);
    expect(wait).toBeGreaterThanOrEqual(8_000);
    expect(wait).toBeLessThanOrEqual(12_000);
    // Jobs fed to BullMQ before the clock moved wait out their delay in real time: run what is due now.
    const dueNow = async (count: number) => (await t.service.jobs.runDue(), tries().length >= count);
    clock.advance(60_000);
    await waitUntil(() => dueNow(2), 20_000, 'the second attempt');
    await waitUntil(async () => (await pending())?.attemptCount === 2, 20_000, 'the second attempt recorded');
    clock.advance(120_000);
    await waitUntil(() => dueNow(3), 20_000, 'the third attempt');
    await waitUntil(async () => (await pending())?.outcome === 'succeeded', 20_000, 'the delivery to succeed');

    expect(new Set(tries().map((entry) => entry.headers['webhook-id'])).size).toBe(1);
    expect(new Set(tries().map((entry) => entry.body)).size).toBe(1);
    for (const entry of tries()) expect(hooks.verify(hook.secret, entry)).toMatchObject({ type: 'custom_event.logged', data: { payload: { amount: 3 } } });
    const delivery = await pending();
    expect(delivery).toMatchObject({
      messageId: tries()[0]!.headers['webhook-id'],
      eventType: 'custom_event.logged',
      outcome: 'succeeded',
      attemptCount: 3,
      lastStatusCode: 200,
      lastError: null,
      nextAttemptAt: null,
      trigger: 'event',
    });
    expect(delivery.attempts.map((attempt: { statusCode: number }) => attempt.statusCode)).toEqual([500, 500, 200]);
  });

  it('replays past events, older than the endpoint too, with the webhook-id of their live delivery', async () => {
    const before = await completeChallenge('replay-before');
    // The engine's facts of that completion are in the log before the endpoint is.
    await t.settle();
    const hooks = await receiver();
    const hook = await createHook(hooks.url, ['achievement.earned']);
    const after = await completeChallenge('replay-after');
    const of = (userId: string) => hooks.received.filter((entry) => entry.json.data.userId === userId);
    await waitUntil(() => of(after.id).length === 1, 20_000, 'the live delivery');
    expect(of(before.id)).toHaveLength(0);
    const liveId = of(after.id)[0]!.headers['webhook-id'];

    const replay = await t.request('POST', `${HOOKS}/${hook.id}/replay`, { ...asTenant(acme), body: {} });
    expect(replay.status, JSON.stringify(replay.body)).toBe(202);
    expect(replay.body).toMatchObject({ webhookId: hook.id, fromPosition: null, untilPosition: expect.stringMatching(/^[0-9a-f]{32}$/) });
    await waitUntil(() => of(before.id).length === 1 && of(after.id).length === 2, 30_000, 'the replayed messages');
    expect(of(after.id)[1]!.headers['webhook-id']).toBe(liveId);
    expect(of(after.id)[1]!.body).toBe(of(after.id)[0]!.body);
    expect(hooks.verify(hook.secret, of(before.id)[0]!)).toMatchObject({ type: 'achievement.earned', data: { userId: before.id } });

    const log = await deliveries(hook.id);
    const replayed = log.filter((delivery) => delivery.trigger === 'replay');
    expect(replayed.every((delivery) => delivery.replayId === replay.body.replayId)).toBe(true);
    expect(replayed.map((delivery) => delivery.messageId)).toContain(liveId);

    // From a position: only what came after it.
    const third = await completeChallenge('replay-third');
    await waitUntil(() => of(third.id).length === 1, 20_000, 'the third live delivery');
    const sinceThird = await t.request('POST', `${HOOKS}/${hook.id}/replay`, {
      ...asTenant(acme),
      body: { fromPosition: replay.body.untilPosition },
    });
    expect(sinceThird.status).toBe(202);
    await waitUntil(() => of(third.id).length === 2, 30_000, 'the third replayed');
    await t.settle();
    await t.service.jobs.runDue();
    expect(of(before.id)).toHaveLength(1);
  });

  it('redelivers a delivery on request, with the same webhook-id', async () => {
    const hooks = await receiver();
    const hook = await createHook(hooks.url, ['achievement.earned']);
    const member = await completeChallenge('redeliver-1');
    await waitUntil(() => hooks.received.length === 1, 20_000, 'the delivery');
    const [delivery] = await deliveries(hook.id);
    await waitUntil(async () => (await deliveries(hook.id))[0].outcome === 'succeeded', 20_000, 'the delivery recorded');

    const again = await t.request('POST', `${HOOKS}/${hook.id}/deliveries/${delivery.id}/redeliver`, { ...asTenant(acme) });
    expect(again.status, JSON.stringify(again.body)).toBe(202);
    expect(again.body).toMatchObject({ deliveryId: delivery.id, webhookId: hook.id, attempt: 2 });
    await waitUntil(() => hooks.received.length === 2, 20_000, 'the redelivery');
    expect(hooks.received[1]!.headers['webhook-id']).toBe(hooks.received[0]!.headers['webhook-id']);
    expect(hooks.received[1]!.json.data.userId).toBe(member.id);
    await waitUntil(async () => (await deliveries(hook.id))[0].attemptCount === 2, 20_000, 'the redelivery recorded');

    const unknown = await t.request('POST', `${HOOKS}/${hook.id}/deliveries/${'f'.repeat(24)}/redeliver`, { ...asTenant(acme) });
    expect(unknown.status).toBe(404);
    const elsewhere = await t.request('POST', `${HOOKS}/${hook.id}/deliveries/${delivery.id}/redeliver`, { ...asTenant(beta) });
    expect(elsewhere.status).toBe(404);
  });

  it('disables an endpoint that answers 410 Gone, and delivers nothing more to it', async () => {
    const hooks = await receiver(() => 410);
    const hook = await createHook(hooks.url, ['achievement.earned']);
    await completeChallenge('gone-1');
    await waitUntil(() => hooks.received.length === 1, 20_000, 'the delivery');
    await waitUntil(
      async () => (await t.request('GET', `${HOOKS}/${hook.id}`, asTenant(acme))).body.status === 'disabled',
      20_000,
      'the endpoint to be disabled',
    );
    expect((await t.request('GET', `${HOOKS}/${hook.id}`, asTenant(acme))).body).toMatchObject({ status: 'disabled', statusReason: 'gone' });
    expect((await deliveries(hook.id))[0]).toMatchObject({ outcome: 'failed', attemptCount: 1, lastStatusCode: 410, nextAttemptAt: null });

    await completeChallenge('gone-2');
    await t.settle();
    await t.service.jobs.runDue();
    expect(hooks.received).toHaveLength(1);
    expect(await deliveries(hook.id)).toHaveLength(1);
    const replay = await t.request('POST', `${HOOKS}/${hook.id}/replay`, { ...asTenant(acme), body: {} });
    expect(replay.status).toBe(409);
  });

  it('signs with the new and the previous secret for a day after a rotation', async () => {
    const hooks = await receiver();
    const hook = await createHook(hooks.url, ['achievement.earned']);
    const rotated = await t.request('POST', `${HOOKS}/${hook.id}/rotate-secret`, asTenant(acme));
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(hook.secret);
    await completeChallenge('rotate-1');
    await waitUntil(() => hooks.received.length === 1, 20_000, 'the delivery');
    const [entry] = hooks.received;
    expect(String(entry!.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(hooks.verify(rotated.body.secret, entry!)).toEqual(entry!.json);
    expect(hooks.verify(hook.secret, entry!)).toEqual(entry!.json);
  });

  it('manages endpoints: list, read, change, delete; the secret is shown twice and stored nowhere', async () => {
    const hooks = await receiver();
    const hook = await createHook(hooks.url, ['reward_asset.*', 'points.awarded']);
    const read = await t.request('GET', `${HOOKS}/${hook.id}`, asTenant(acme, { 'x-min-position': '' }));
    expect(read.status).toBe(400);
    const got = await t.request('GET', `${HOOKS}/${hook.id}`, asTenant(acme, { 'x-min-position': hook.position }));
    expect(got.body).toEqual({
      id: hook.id,
      organisationId: acme.organisationId,
      url: hooks.url,
      eventTypes: ['reward_asset.*', 'points.awarded'],
      description: null,
      status: 'enabled',
      statusReason: null,
      failingSince: null,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      createdBy: expect.any(String),
      updatedBy: expect.any(String),
    });
    const list = await t.request('GET', `${HOOKS}?limit=100`, asTenant(acme));
    expect(list.body.edges.map((edge: { id: string }) => edge.id)).toContain(hook.id);
    expect(JSON.stringify(list.body)).not.toContain('whsec_');
    expect((await t.request('GET', `${HOOKS}/${hook.id}`, asTenant(beta))).status).toBe(404);
    expect((await t.request('GET', HOOKS, asTenant(beta))).body.totalCount).toBe(0);

    const patched = await t.request('PATCH', `${HOOKS}/${hook.id}`, { ...asTenant(acme), body: { eventTypes: ['*'], status: 'disabled', description: 'all' } });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body).toMatchObject({ eventTypes: ['*'], status: 'disabled', statusReason: 'requested', description: 'all' });
    expect(patched.body.secret).toBeUndefined();

    // The secret is in no event, no read model, no idempotency record.
    const rows = await sql<{ n: number }>`select count(*)::int as n from es_events where data::text like ${`%${hook.secret.slice(6, 30)}%`}`.execute(
      t.service.database.db,
    );
    expect(rows.rows[0]!.n).toBe(0);

    const deleted = await t.request('DELETE', `${HOOKS}/${hook.id}`, asTenant(acme));
    expect(deleted.status).toBe(204);
    expect(deleted.headers['x-event-position']).toMatch(/^[0-9a-f]{32}$/);
    const gone = await t.request('GET', `${HOOKS}/${hook.id}`, asTenant(acme, { 'x-min-position': deleted.headers['x-event-position'] as string }));
    expect(gone.status).toBe(404);
    expect((await t.request('DELETE', `${HOOKS}/${hook.id}`, asTenant(acme))).status).toBe(404);
    expect((await t.request('GET', `${HOOKS}/${hook.id}/deliveries`, asTenant(acme))).status).toBe(404);
  });

  it('refuses bad input with a 400 that says where, and changes nothing', async () => {
    const count = await t.eventCount();
    const bad = async (body: unknown, path: string) => {
      const response = await t.request('POST', HOOKS, { ...asTenant(acme), body });
      expect(response.status, JSON.stringify(response.body)).toBe(400);
      expect(response.body.code).toBe('BAD_REQUEST');
      expect(JSON.stringify(response.body.issues)).toContain(path);
      return response.body;
    };
    await bad({ url: 'ftp://example.com', eventTypes: ['*'] }, 'url');
    await bad({ url: 'https://example.com', eventTypes: [] }, 'eventTypes');
    expect((await bad({ url: 'https://example.com', eventTypes: ['reward_assets.*'] }, 'eventTypes')).issues[0].message).toContain('reward_asset.*');
    await bad({ url: 'https://example.com', eventTypes: ['*'], secret: 'mine' }, 'secret');
    const replay = await t.request('POST', `${HOOKS}/${'a'.repeat(24)}/replay`, { ...asTenant(acme), body: { fromPosition: 'nope' } });
    expect(replay.status).toBe(400);
    expect((await t.request('POST', `${HOOKS}/${'a'.repeat(24)}/replay`, { ...asTenant(acme), body: {} })).status).toBe(404);
    expect((await t.request('PATCH', `${HOOKS}/not-an-id`, { ...asTenant(acme), body: { description: 'x' } })).status).toBe(404);
    expect(await t.eventCount()).toBe(count);
  });
});
