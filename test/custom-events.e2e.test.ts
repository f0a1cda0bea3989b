import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitForProjections } from '../projectors/runtime/index.ts';
import { streamStatesOf } from '../command-api/stream-states.ts';
import { externalUserIdStream } from '../command-api/users.ts';
import { startTestService, type TestService, type Tenant } from './support/service.ts';

const PATH = '/api/v2/admin/events/custom';

describe('POST /events/custom over HTTP', () => {
  let t: TestService;
  let acme: Tenant;
  let beta: Tenant;
  let community: string;
  let betaCommunity: string;
  let alice: { id: string; externalUserId: string };
  const as = (tenant: Tenant, extra: Record<string, string> = {}) => ({ host: tenant.domain, headers: { 'x-api-token': tenant.token, ...extra } });
  const log = (body: unknown, tenant: Tenant = acme) => t.request('POST', PATH, { ...as(tenant), body });
  const valid = () => ({ eventName: 'purchase', payload: { amount: 12.5, sku: 'A-1', tags: ['x'] }, userId: alice.id, communityId: community });

  async function createCommunity(tenant: Tenant): Promise<string> {
    const response = await t.request('POST', '/api/v2/admin/communities', { ...as(tenant), body: { name: 'Runners' } });
    expect(response.status).toBe(201);
    return response.body.id;
  }

  async function readModelRow(position: string, id: string) {
    expect(await waitForProjections(t.service.database.db, ['custom_events'], position as never, 10_000)).toBe(true);
    return t.service.database.db.selectFrom('custom_events').selectAll().where('id', '=', id).executeTakeFirst();
  }

  beforeAll(async () => {
    t = await startTestService();
    acme = await t.createOrganisation('acme');
    beta = await t.createOrganisation('beta');
    community = await createCommunity(acme);
    betaCommunity = await createCommunity(beta);
    const created = await t.request('POST', '/api/v2/admin/users', { ...as(acme), body: { externalUserId: 'crm-alice' } });
    expect(created.status).toBe(201);
    alice = { id: created.body.id, externalUserId: 'crm-alice' };
  });
  afterAll(async () => {
    await t.close();
  });

  it('logs an event for a user by platform id: 200, the contract fields, one event, and the read model row', async () => {
    const before = await t.eventCount();
    const response = await log(valid());
    expect(response.status).toBe(200);
    expect(Object.keys(response.body).sort()).toEqual(['createdAt', 'externalUserId', 'id', 'name', 'payload', 'userId']);
    expect(response.body.id).toMatch(/^[0-9a-f]{24}$/);
    expect(response.body.name).toBe('purchase');
    expect(response.body.userId).toBe(alice.id);
    expect(response.body.externalUserId).toBe('crm-alice');
    expect(response.body.payload).toEqual({ amount: 12.5, sku: 'A-1', tags: ['x'] });
    expect(new Date(response.body.createdAt).toISOString()).toBe(response.body.createdAt);
    expect(response.headers['x-event-position']).toMatch(/^[0-9a-f]{32}$/);
    expect(await t.eventCount()).toBe(before + 1);

    const [stored] = await t.service.store.readStream(`customevent-${response.body.id}`);
    expect(stored!.type).toBe('CustomEventLogged');
    expect(stored!.data).toEqual({
      eventId: response.body.id,
      organisationId: acme.organisationId,
      communityId: community,
      userId: alice.id,
      externalUserId: 'crm-alice',
      name: 'purchase',
      payload: { amount: 12.5, sku: 'A-1', tags: ['x'] },
      nonce: null,
      source: { type: 'api', tokenId: stored!.metadata.actor },
      occurredAt: response.body.createdAt,
    });

    const row = await readModelRow(response.headers['x-event-position'] as string, response.body.id);
    expect(row).toMatchObject({
      organisation_id: acme.organisationId,
      community_id: community,
      user_id: alice.id,
      external_user_id: 'crm-alice',
      name: 'purchase',
      payload: { amount: 12.5, sku: 'A-1', tags: ['x'] },
      nonce: null,
      event_source_id: stored!.metadata.actor,
      source_type: 'api',
      tags: ['custom'],
    });
    expect(row!.created_at.toISOString()).toBe(response.body.createdAt);
  });

  it('finds the user by external id; payload defaults to {} and the name is trimmed', async () => {
    const response = await log({ eventName: '  signed-up ', userId: 'crm-alice', communityId: community.toUpperCase() });
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ name: 'signed-up', userId: alice.id, externalUserId: 'crm-alice', payload: {} });
    const [stored] = await t.service.store.readStream(`customevent-${response.body.id}`);
    expect(stored!.data).toMatchObject({ communityId: community, payload: {} });
  });

  const invalid: [string, Record<string, unknown>, string][] = [
    ['eventName missing', { eventName: undefined }, 'eventName'],
    ['eventName empty', { eventName: '' }, 'eventName'],
    ['eventName blank', { eventName: '   ' }, 'eventName'],
    ['eventName over 200 characters', { eventName: 'x'.repeat(201) }, 'eventName'],
    ['eventName not a string', { eventName: 5 }, 'eventName'],
    ['payload an array', { payload: [1, 2] }, 'payload'],
    ['payload a string', { payload: 'hello' }, 'payload'],
    ['payload null', { payload: null }, 'payload'],
    ['payload over 100 keys', { payload: Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`k${i}`, i])) }, 'payload'],
    ['payload nested too deep', { payload: { a: { b: { c: { d: { e: { f: 1 } } } } } } }, 'payload'],
    ['userId missing', { userId: undefined }, 'userId'],
    ['userId empty', { userId: '' }, 'userId'],
    ['userId over 200 characters', { userId: 'u'.repeat(201) }, 'userId'],
    ['userId not a string', { userId: 42 }, 'userId'],
    ['nonce empty', { nonce: '' }, 'nonce'],
    ['nonce over 200 characters', { nonce: 'n'.repeat(201) }, 'nonce'],
    ['nonce not a string', { nonce: 7 }, 'nonce'],
    ['communityId missing', { communityId: undefined }, 'communityId'],
    ['communityId not 24 hex', { communityId: 'xyz' }, 'communityId'],
    ['communityId of 25 hex', { communityId: 'a'.repeat(25) }, 'communityId'],
    ['autoCreateUser not a boolean', { autoCreateUser: 'yes' }, 'autoCreateUser'],
    ['an unknown field', { eventname: 'typo' }, ''],
  ];
  it.each(invalid)('400 with issues and nothing appended: %s', async (_label, change, path) => {
    const before = await t.eventCount();
    const response = await log({ ...valid(), ...change });
    expect(response.status).toBe(400);
    expect(response.body.code).toBe('BAD_REQUEST');
    expect(response.body.message).toBe('Invalid input data');
    expect(response.body.issues.length).toBeGreaterThan(0);
    expect(response.body.issues.some((issue: { path: unknown[] }) => issue.path.join('.') === path)).toBe(true);
    expect(await t.eventCount()).toBe(before);
  });

  it('400 and nothing appended for a body that is not an object, or a community the organisation does not have', async () => {
    const before = await t.eventCount();
    expect((await t.request('POST', PATH, { ...as(acme), rawBody: '[1]' })).status).toBe(400);
    const unknown = await log({ ...valid(), communityId: 'f'.repeat(24) });
    expect(unknown.status).toBe(400);
    expect(unknown.body.issues[0].message).toMatch(/does not exist/);
    expect((await log({ ...valid(), communityId: betaCommunity })).status).toBe(400);
    expect(await t.eventCount()).toBe(before);
  });

  it('401 without a token, with an unknown one, or on another organisation’s domain', async () => {
    const before = await t.eventCount();
    const none = await t.request('POST', PATH, { host: acme.domain, body: valid() });
    expect(none.status).toBe(401);
    expect(none.body.code).toBe('UNAUTHORIZED');
    expect((await t.request('POST', PATH, { host: acme.domain, headers: { 'x-api-token': 'eng_nope_nope' }, body: valid() })).status).toBe(401);
    expect((await t.request('POST', PATH, { host: beta.domain, headers: { 'x-api-token': acme.token }, body: valid() })).status).toBe(401);
    expect(await t.eventCount()).toBe(before);
  });

  it('404 "User not found" and nothing appended for an unknown user without autoCreateUser, or another organisation’s user', async () => {
    const before = await t.eventCount();
    for (const userId of ['nobody', 'f'.repeat(24)]) {
      const response = await log({ ...valid(), userId });
      expect(response.status).toBe(404);
      expect(response.body).toEqual({ message: 'User not found', code: 'NOT_FOUND' });
    }
    const explicit = await log({ ...valid(), userId: 'nobody', autoCreateUser: false });
    expect(explicit.status).toBe(404);
    const otherOrganisation = await log({ ...valid(), userId: alice.id, communityId: betaCommunity }, beta);
    expect(otherOrganisation.status).toBe(404);
    expect((await log({ ...valid(), userId: 'crm-alice', communityId: betaCommunity }, beta)).status).toBe(404);
    expect(await t.eventCount()).toBe(before);
  });

  it('autoCreateUser creates the user with the event, in one append, then finds it', async () => {
    const before = await t.eventCount();
    const response = await log({ ...valid(), userId: 'crm-new-1', autoCreateUser: true });
    expect(response.status).toBe(200);
    expect(response.body.externalUserId).toBe('crm-new-1');
    expect(response.body.userId).toMatch(/^[0-9a-f]{24}$/);
    expect(await t.eventCount()).toBe(before + 3);
    const user = await t.service.store.readStream(`user-${response.body.userId}`);
    expect(user.map((event) => event.type)).toEqual(['UserCreated']);
    expect(user[0]!.data).toMatchObject({ organisationId: acme.organisationId, externalUserId: 'crm-new-1', communityIds: [community] });
    const [event] = await t.service.store.readStream(`customevent-${response.body.id}`);
    // One atomic append: the user and the event share its transaction.
    expect(event!.position.slice(0, 16)).toBe(user[0]!.position.slice(0, 16));

    const again = await log({ ...valid(), userId: 'crm-new-1', autoCreateUser: true });
    expect(again.status).toBe(200);
    expect(again.body.userId).toBe(response.body.userId);
    expect(await t.eventCount()).toBe(before + 4);
    const member = await t.request(
      'GET',
      `/api/v2/admin/users/${response.body.userId}`,
      as(acme, { 'x-min-position': again.headers['x-event-position'] as string }),
    );
    expect(member.status).toBe(200);
    expect(member.body.externalUserId).toBe('crm-new-1');
  });

  it('a userId with spaces around it names the user POST /users stored trimmed: no second user, with or without autoCreateUser', async () => {
    const created = await t.request('POST', '/api/v2/admin/users', { ...as(acme), body: { externalUserId: '  crm-padded  ', communityIds: [community] } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.externalUserId).toBe('crm-padded');
    for (const autoCreateUser of [true, false]) {
      const logged = await log({ ...valid(), userId: ' crm-padded ', autoCreateUser });
      expect(logged.status, logged.text).toBe(200);
      expect(logged.body).toMatchObject({ userId: created.body.id, externalUserId: 'crm-padded' });
    }
    const listed = await t.request(
      'GET',
      '/api/v2/admin/users?externalUserId=%20crm-padded%20',
      as(acme, { 'x-min-position': created.headers['x-event-position'] as string }),
    );
    expect(listed.body.edges.map((user: { id: string }) => user.id)).toEqual([created.body.id]);
  });

  it('autoCreateUser with a platform-id-shaped userId nobody has creates a user with that external id', async () => {
    const response = await log({ ...valid(), userId: 'e'.repeat(24), autoCreateUser: true });
    expect(response.status).toBe(200);
    expect(response.body.externalUserId).toBe('e'.repeat(24));
    expect(response.body.userId).not.toBe('e'.repeat(24));
  });

  it('autoCreateUser for an existing user this process holds nothing of (as another process would) logs the event for that user', async () => {
    const { userId, claimStream } = await t.userCreatedElsewhere(acme, 'crm-elsewhere');
    const before = await t.eventCount();
    // The claim is taken unread as a new stream: the append refuses it, and the event goes to the user who has it.
    const response = await log({ ...valid(), userId: 'crm-elsewhere', autoCreateUser: true });
    expect(response.status).toBe(200);
    expect(response.body.userId).toBe(userId);
    expect(response.body.externalUserId).toBe('crm-elsewhere');
    expect(await t.eventCount()).toBe(before + 1);
    expect(await t.service.store.readStream(claimStream)).toHaveLength(1);
    // Its claim is now known here: the next one is decided on it.
    expect(streamStatesOf(t.service.store).has(claimStream)).toBe(true);
    const again = await log({ ...valid(), userId: 'crm-elsewhere', autoCreateUser: true });
    expect(again.body.userId).toBe(userId);
  });

  it('autoCreateUser creates exactly one user when requests race', async () => {
    const responses = await Promise.all(Array.from({ length: 8 }, (_, i) => log({ ...valid(), payload: { i }, userId: 'crm-race', autoCreateUser: true })));
    expect(responses.map((r) => r.status)).toEqual(Array(8).fill(200));
    const userIds = new Set(responses.map((r) => r.body.userId));
    expect(userIds.size).toBe(1);
    expect(new Set(responses.map((r) => r.body.id)).size).toBe(8);
    const claim = await t.service.store.readStream(externalUserIdStream(acme.organisationId, 'crm-race'));
    expect(claim).toHaveLength(1);
    const [userId] = [...userIds];
    expect((await t.service.store.readStream(`user-${userId}`)).map((event) => event.type)).toEqual(['UserCreated']);
  });

  it('a nonce already used by the organisation answers with the first result and appends nothing, whatever the body', async () => {
    const first = await log({ ...valid(), nonce: 'order-1001' });
    expect(first.status).toBe(200);
    const before = await t.eventCount();
    const same = await log({ ...valid(), nonce: 'order-1001' });
    expect(same.status).toBe(200);
    // The first answer again, byte for byte: its keys in their order too.
    expect(same.text).toBe(first.text);
    expect(same.headers['idempotent-replayed']).toBe('true');
    const different = await log({ ...valid(), eventName: 'refund', payload: {}, nonce: 'order-1001' });
    expect(different.status).toBe(200);
    expect(different.text).toBe(first.text);
    const unknownUser = await log({ ...valid(), userId: 'nobody', nonce: 'order-1001' });
    expect(unknownUser.status).toBe(200);
    expect(unknownUser.body).toEqual(first.body);
    expect(await t.eventCount()).toBe(before);
    const [stored] = await t.service.store.readStream(`customevent-${first.body.id}`);
    expect(stored!.data).toMatchObject({ nonce: 'order-1001' });

    const otherOrganisation = await t.request('POST', '/api/v2/admin/users', { ...as(beta), body: { externalUserId: 'crm-bob' } });
    const inBeta = await log({ ...valid(), userId: otherOrganisation.body.id, communityId: betaCommunity, nonce: 'order-1001' }, beta);
    expect(inBeta.status).toBe(200);
    expect(inBeta.body.id).not.toBe(first.body.id);
  });

  it('the same nonce sent concurrently logs one event and every request gets its answer', async () => {
    const before = await t.eventCount();
    const responses = await Promise.all(Array.from({ length: 8 }, () => log({ ...valid(), nonce: 'order-race' })));
    expect(responses.map((r) => r.status)).toEqual(Array(8).fill(200));
    for (const response of responses) expect(response.body).toEqual(responses[0]!.body);
    // The event and the nonce's record.
    expect(await t.eventCount()).toBe(before + 2);
  });

  it('the same nonce with autoCreateUser sent concurrently creates one user and one event', async () => {
    const before = await t.eventCount();
    const responses = await Promise.all(
      Array.from({ length: 6 }, () => log({ ...valid(), userId: 'crm-nonce-race', autoCreateUser: true, nonce: 'signup-1' })),
    );
    expect(responses.map((r) => r.status)).toEqual(Array(6).fill(200));
    for (const response of responses) expect(response.body).toEqual(responses[0]!.body);
    // The claim, the user, the event and the nonce's record.
    expect(await t.eventCount()).toBe(before + 4);
  });

  it('describes the route in the admin OpenAPI document', async () => {
    const response = await t.request('GET', '/api/v2/admin/openapi.json', { host: acme.domain });
    const operation = response.body.paths['/events/custom'].post;
    expect(Object.keys(operation.responses)).toEqual(expect.arrayContaining(['200', '400', '401', '404']));
    expect(response.body.components.schemas.LogCustomEvent.required.sort()).toEqual(['communityId', 'eventName', 'userId']);
    expect(response.body.components.schemas.CustomEvent).toBeDefined();
  });
});
