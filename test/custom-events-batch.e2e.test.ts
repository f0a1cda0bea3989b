import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { externalUserIdStream } from '../command-api/users.ts';
import { waitForProjections } from '../projectors/runtime/index.ts';
import { waitUntil } from './support/projections.ts';
import { startTestService, type TestService, type Tenant } from './support/service.ts';
import { startReceiver } from './support/webhook-receiver.ts';

const PATH = '/api/v2/admin/events/custom/batch';

describe('POST /events/custom/batch over HTTP', () => {
  let t: TestService;
  let acme: Tenant;
  let beta: Tenant;
  let community: string;
  let betaCommunity: string;
  let alice: { id: string; externalUserId: string };
  let nonces = 0;
  const nonce = () => `batch-${++nonces}`;
  const as = (tenant: Tenant) => ({ host: tenant.domain, headers: { 'x-api-token': tenant.token } });
  const batch = (body: unknown, tenant: Tenant = acme) => t.request('POST', PATH, { ...as(tenant), body });
  const event = (extra: Record<string, unknown> = {}) => ({ eventName: 'purchase', userId: alice.id, communityId: community, nonce: nonce(), ...extra });

  beforeAll(async () => {
    t = await startTestService({ env: { WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'true' }, jobOptions: { pollMs: 100 } });
    acme = await t.createOrganisation('acme');
    beta = await t.createOrganisation('beta');
    for (const [tenant, set] of [
      [acme, (id: string) => (community = id)],
      [beta, (id: string) => (betaCommunity = id)],
    ] as const) {
      const response = await t.request('POST', '/api/v2/admin/communities', { ...as(tenant), body: { name: 'Runners' } });
      expect(response.status).toBe(201);
      set(response.body.id);
    }
    const created = await t.request('POST', '/api/v2/admin/users', { ...as(acme), body: { externalUserId: 'crm-alice' } });
    expect(created.status).toBe(201);
    alice = { id: created.body.id, externalUserId: 'crm-alice' };
  });
  afterAll(async () => {
    await t.close();
  });

  it('answers one result per event in order, logs the valid ones and refuses the others one by one', async () => {
    const before = await t.eventCount();
    const body = [
      event({ payload: { amount: 1 } }),
      event({ eventName: '' }),
      event({ userId: 'crm-alice', payload: { amount: 2 } }),
      event({ userId: 'nobody' }),
      event({ communityId: 'f'.repeat(24) }),
      event({ userId: 'crm-batch-new', autoCreateUser: true }),
      event({ nonce: undefined }),
      event({ surprise: true }),
    ];
    const response = await batch(body);
    expect(response.status).toBe(200);
    expect(response.headers['x-event-position']).toMatch(/^[0-9a-f]{32}$/);
    const results = response.body as {
      status: number;
      event?: Record<string, unknown>;
      error?: { code: string; message: string; issues?: { path: unknown[] }[] };
    }[];
    expect(results.map((result) => result.status)).toEqual([200, 400, 200, 404, 400, 200, 400, 400]);

    expect(results[0]!.event).toMatchObject({ name: 'purchase', userId: alice.id, externalUserId: 'crm-alice', payload: { amount: 1 } });
    expect(Object.keys(results[0]!).sort()).toEqual(['event', 'status']);
    expect(results[1]!.error).toMatchObject({ code: 'BAD_REQUEST', message: 'Invalid input data' });
    expect(results[1]!.error!.issues!.some((issue) => issue.path.join('.') === 'eventName')).toBe(true);
    expect(results[2]!.event).toMatchObject({ userId: alice.id, payload: { amount: 2 } });
    expect(results[3]).toEqual({ status: 404, error: { message: 'User not found', code: 'NOT_FOUND' } });
    expect(results[4]!.error!.issues![0]).toMatchObject({ message: expect.stringMatching(/does not exist/) });
    expect(results[5]!.event).toMatchObject({ externalUserId: 'crm-batch-new' });
    expect(results[6]!.error!.issues!.some((issue) => issue.path.join('.') === 'nonce')).toBe(true);
    expect(results[7]!.error!.code).toBe('BAD_REQUEST');

    // Three events, and the new user's claim and creation, and a nonce record per logged event.
    expect(await t.eventCount()).toBe(before + 3 + 2 + 3);
    for (const index of [0, 2, 5]) {
      const [stored] = await t.service.store.readStream(`customevent-${results[index]!.event!.id as string}`);
      expect(stored!.data).toMatchObject({ organisationId: acme.organisationId, nonce: body[index]!.nonce, source: { type: 'api' } });
    }
    // Appended together: one transaction holds every accepted event.
    const positions = await Promise.all(
      [0, 2, 5].map(async (index) => (await t.service.store.readStream(`customevent-${results[index]!.event!.id as string}`))[0]!.position.slice(0, 16)),
    );
    expect(new Set(positions).size).toBe(1);

    // The read model has every logged event once the position is reached.
    expect(await waitForProjections(t.service.database.db, ['custom_events'], response.headers['x-event-position'] as never, 10_000)).toBe(true);
    const rows = await t.service.database.db
      .selectFrom('custom_events')
      .select('id')
      .where(
        'id',
        'in',
        [0, 2, 5].map((index) => results[index]!.event!.id as string),
      )
      .execute();
    expect(rows).toHaveLength(3);

    // The same batch again: the same results, nothing new.
    const settledCount = await t.eventCount();
    const again = await batch(body);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(response.body);
    expect(await t.eventCount()).toBe(settledCount);
  });

  it('shares nonces with POST /events/custom, and a nonce repeated within a batch answers what its first event did', async () => {
    const single = await t.request('POST', '/api/v2/admin/events/custom', { ...as(acme), body: event({ nonce: 'shared-1' }) });
    expect(single.status).toBe(200);
    const before = await t.eventCount();
    const response = await batch([event({ nonce: 'shared-1', eventName: 'other' }), event({ nonce: 'twice' }), event({ nonce: 'twice', eventName: 'refund' })]);
    expect(response.status).toBe(200);
    expect(response.body[0]).toEqual({ status: 200, event: single.body });
    expect(response.body[1].status).toBe(200);
    expect(response.body[2]).toEqual(response.body[1]);
    // One event and its nonce record.
    expect(await t.eventCount()).toBe(before + 2);
  });

  it('creates one user when several events of a batch auto-create the same external id', async () => {
    const response = await batch([1, 2, 3].map((i) => event({ userId: 'crm-batch-twice', autoCreateUser: true, payload: { i } })));
    expect(response.body.map((result: { status: number }) => result.status)).toEqual([200, 200, 200]);
    const userIds = new Set(response.body.map((result: { event: { userId: string } }) => result.event.userId));
    expect(userIds.size).toBe(1);
    expect(await t.service.store.readStream(externalUserIdStream(acme.organisationId, 'crm-batch-twice'))).toHaveLength(1);
    expect((await t.service.store.readStream(`user-${[...userIds][0] as string}`)).map((e) => e.type)).toEqual(['UserCreated']);
  });

  it('an event that auto-creates an existing user this process holds nothing of goes to that user', async () => {
    const { userId, claimStream } = await t.userCreatedElsewhere(acme, 'crm-batch-elsewhere');
    const before = await t.eventCount();
    const response = await batch([event({ userId: 'crm-batch-elsewhere', autoCreateUser: true }), event({ userId: 'crm-batch-fresh', autoCreateUser: true })]);
    expect(response.body.map((result: { status: number }) => result.status)).toEqual([200, 200]);
    expect(response.body[0].event.userId).toBe(userId);
    expect(await t.service.store.readStream(claimStream)).toHaveLength(1);
    // Two events with their nonce records, and the fresh user's claim and creation.
    expect(await t.eventCount()).toBe(before + 6);
  });

  it('a NUL or an unpaired surrogate in one event refuses that event, not the batch', async () => {
    const before = await t.eventCount();
    const response = await batch([event({ payload: { note: 'a\u0000b' } }), event(), event({ eventName: 'x\ud800' }), event({ payload: { ['k\u0000']: 1 } })]);
    expect(response.status).toBe(200);
    expect(response.body.map((result: { status: number }) => result.status)).toEqual([400, 200, 400, 400]);
    expect(response.body[0].error.issues[0]).toMatchObject({ path: ['body', 'payload', 'note'], message: expect.stringMatching(/NUL/) });
    expect(response.body[2].error.issues[0]).toMatchObject({ path: ['body', 'eventName'], message: expect.stringMatching(/surrogate/) });
    expect(await t.eventCount()).toBe(before + 2);
    // Outside a batch array the rule still refuses the whole request.
    expect((await batch({ events: [event({ eventName: 'x\u0000' })] })).status).toBe(400);
  });

  it('400 with the contract’s error body for a body that is not an array of 1 to 100 events', async () => {
    const before = await t.eventCount();
    for (const body of [{ events: [] }, [], Array.from({ length: 101 }, () => event()), {}]) {
      const response = await batch(body);
      expect(response.status).toBe(400);
      expect(response.body).toMatchObject({ code: 'BAD_REQUEST', message: 'Invalid input data' });
      expect(response.body.issues[0].message).toMatch(/array of 1 to 100/);
    }
    for (const rawBody of ['"text"', 'null', '[1,']) {
      const response = await t.request('POST', PATH, { ...as(acme), headers: { ...as(acme).headers, 'content-type': 'application/json' }, rawBody });
      expect(response.status).toBe(400);
      expect(response.body.code).toBe('BAD_REQUEST');
    }
    const hundred = await batch(Array.from({ length: 100 }, (_, i) => event({ payload: { i } })));
    expect(hundred.status).toBe(200);
    expect(hundred.body.every((result: { status: number }) => result.status === 200)).toBe(true);
    expect(await t.eventCount()).toBe(before + 200);
  });

  it('keeps organisations apart: another organisation’s users, communities and nonces', async () => {
    const used = event();
    expect((await batch([used])).body[0].status).toBe(200);
    const response = await batch(
      [
        event({ communityId: betaCommunity }),
        event({ userId: 'crm-alice', communityId: betaCommunity }),
        event({ userId: 'crm-beta', communityId: community, autoCreateUser: true }),
        { ...used, userId: 'crm-beta', communityId: betaCommunity, autoCreateUser: true },
      ],
      beta,
    );
    expect(response.status).toBe(200);
    expect(response.body.map((result: { status: number }) => result.status)).toEqual([404, 404, 400, 200]);
    expect(response.body[3].event.externalUserId).toBe('crm-beta');
    const [stored] = await t.service.store.readStream(`customevent-${response.body[3].event.id as string}`);
    expect(stored!.data).toMatchObject({ organisationId: beta.organisationId, communityId: betaCommunity });
    expect((await batch([used], acme)).body[0].event.userId).toBe(alice.id);
  });

  it('delivers each logged event of a batch to webhooks as custom_event.logged, signed', async () => {
    const receiver = await startReceiver();
    try {
      const hook = await t.request('POST', '/api/v2/admin/webhooks', { ...as(acme), body: { url: receiver.url, eventTypes: ['custom_event.logged'] } });
      expect(hook.status).toBe(201);
      const response = await batch([event({ eventName: 'hooked-1' }), event({ eventName: '' }), event({ eventName: 'hooked-2', payload: { n: 2 } })]);
      expect(response.body.map((result: { status: number }) => result.status)).toEqual([200, 400, 200]);
      const hooked = () => receiver.ofType('custom_event.logged').filter((entry) => String(entry.json.data.name).startsWith('hooked-'));
      await waitUntil(() => hooked().length >= 2, 30_000, 'two custom_event.logged deliveries');
      const documents = hooked().map((entry) => receiver.verify(hook.body.secret, entry) as { data: { id: string; name: string; payload: unknown } });
      expect(documents.map((document) => document.data.name).sort()).toEqual(['hooked-1', 'hooked-2']);
      expect(documents.find((document) => document.data.name === 'hooked-2')!.data).toMatchObject({ id: response.body[2].event.id, payload: { n: 2 } });
    } finally {
      await receiver.close();
    }
  });

  it('401 without a token, and nothing appended', async () => {
    // Deliveries of the webhook test's hooks may still be recorded meanwhile: they are not what is counted.
    const before = await t.eventCount(['webhookdelivery-']);
    const response = await t.request('POST', PATH, { host: acme.domain, body: [event()] });
    expect(response.status).toBe(401);
    expect(response.body.code).toBe('UNAUTHORIZED');
    expect(await t.eventCount(['webhookdelivery-'])).toBe(before);
  });

  it('describes the route in the admin OpenAPI document', async () => {
    const response = await t.request('GET', '/api/v2/admin/openapi.json', { host: acme.domain });
    const operation = response.body.paths['/events/custom/batch'].post;
    expect(operation.operationId).toBe('logCustomEventBatch');
    expect(operation.requestBody.content['application/json'].example).toHaveLength(2);
    expect(response.body.components.schemas.LogCustomEventBatch).toMatchObject({ type: 'array', minItems: 1, maxItems: 100 });
    expect(response.body.components.schemas.BatchedCustomEvent.required.sort()).toEqual(['communityId', 'eventName', 'nonce', 'userId']);
    expect(response.body.paths['/events/custom'].post.operationId).toBe('logCustomEvent');
  });
});
