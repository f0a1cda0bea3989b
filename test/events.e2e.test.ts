import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventRecordSchema } from '../api/contract/event-records.ts';
import { ManualClock } from './support/clock.ts';
import { adminOf, type Member } from './support/programme.ts';
import { asTenant, startTestService, type Tenant, type TestService } from './support/service.ts';

const EVENTS = '/api/v2/integration/events';

/**
 * `GET /integration/events` on events logged at times the test sets:
 *
 *   1 Mar 10:00  alice  visit     coffee  nonce n-1, payload {store: Lisbon, total: 12}
 *   1 Mar 11:00  bob    purchase  tea     payload {total: 30, name: "not the event name"}
 *   2 Mar 09:00  alice  purchase  tea     (logged by her external id)
 *   2 Mar 09:00  bob    visit     coffee  (the same instant: the larger id first)
 *   3 Mar 08:00  alice  poster    coffee  (a link she redeemed)
 *   1 Mar 12:00  Beta's user logs an event at Beta.
 */
describe('GET /integration/events', () => {
  const clock = new ManualClock('2027-03-01T09:00:00Z');
  let t: TestService;
  let acme: Tenant & { tokenId: string };
  let beta: Tenant;
  let coffee: string;
  let tea: string;
  let alice: Member;
  let bob: Member;
  let linkId: string;
  const ids: Record<string, string> = {};
  const list = async (query = '', tenant: Tenant = acme) => t.request('GET', `${EVENTS}${query}`, asTenant(tenant));
  const names = async (query: string) => {
    const response = await list(query);
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    return (response.body.edges as { id: string }[]).map((record) => Object.entries(ids).find(([, id]) => id === record.id)?.[0] ?? record.id);
  };

  beforeAll(async () => {
    t = await startTestService({ clock, jobs: false });
    acme = await t.createOrganisation('events');
    beta = await t.createOrganisation('events-beta');
    const admin = adminOf(t, acme);
    coffee = await admin.community('Coffee');
    tea = await admin.community('Tea');
    alice = await admin.user('crm-alice', [coffee, tea]);
    bob = await admin.user('crm-bob', [coffee, tea]);
    const log = async (key: string, at: string, body: Record<string, unknown>, as = admin) => {
      clock.set(at);
      ids[key] = (await as.post('/events/custom', body)).id;
    };
    await log('alice-visit', '2027-03-01T10:00:00Z', {
      eventName: 'visit',
      userId: alice.id,
      communityId: coffee,
      nonce: 'n-1',
      payload: { store: 'Lisbon', total: 12 },
    });
    await log('bob-purchase', '2027-03-01T11:00:00Z', {
      eventName: 'purchase',
      userId: bob.id,
      communityId: tea,
      payload: { total: 30, name: 'not the event name' },
    });
    await log('alice-purchase', '2027-03-02T09:00:00Z', { eventName: 'purchase', userId: 'crm-alice', communityId: tea });
    await log('bob-visit', '2027-03-02T09:00:00Z', { eventName: 'visit', userId: bob.id, communityId: coffee });
    clock.set('2027-03-03T07:00:00Z');
    const url = (await admin.post('/events/custom/link', { eventName: 'poster', communityId: coffee, payload: { wall: 'B' }, expiryTime: 86_400 }))
      .url as string;
    linkId = url.split('/l/')[1]!.split('.')[0]!;
    clock.set('2027-03-03T08:00:00Z');
    const redeemed = await t.request('POST', '/api/v2/integration/events/custom/links/redeem', {
      ...asTenant(acme, { authorization: `Bearer ${alice.token}` }),
      body: { token: url.split('/l/')[1] },
    });
    expect(redeemed.status, JSON.stringify(redeemed.body)).toBe(200);
    ids['alice-poster'] = redeemed.body.id;
    const betaAdmin = adminOf(t, beta);
    const betaCommunity = await betaAdmin.community('Beta');
    const betaUser = await betaAdmin.user('crm-alice', [betaCommunity]);
    await log('beta-visit', '2027-03-01T12:00:00Z', { eventName: 'visit', userId: betaUser.id, communityId: betaCommunity }, betaAdmin);
    await t.settle();
  }, 60_000);
  afterAll(async () => {
    await t.close();
  });

  const newestFirst = () => {
    const [sameInstantFirst, sameInstantSecond] = [ids['alice-purchase']!, ids['bob-visit']!].sort().reverse();
    const key = (id: string) => Object.entries(ids).find(([, candidate]) => candidate === id)![0];
    return ['alice-poster', key(sameInstantFirst!), key(sameInstantSecond!), 'bob-purchase', 'alice-visit'];
  };

  it('serves event records with every contract field, of its type, and nothing else', async () => {
    const response = await list('?limit=100');
    expect(response.status).toBe(200);
    expect(Object.keys(response.body)).toEqual(['totalCount', 'edges']);
    expect(response.body.totalCount).toBe(5);
    for (const record of response.body.edges) {
      expect(Object.keys(record)).toEqual(['id', 'nonce', 'createdAt', 'organisationId', 'communityId', 'userId', 'eventSourceId', 'payload', 'tags']);
      expect(eventRecordSchema.strict().safeParse(record).success).toBe(true);
      expect(record).toEqual({
        id: expect.stringMatching(/^[0-9a-f]{24}$/),
        nonce: record.nonce === null ? null : expect.any(String),
        createdAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/),
        organisationId: acme.organisationId,
        communityId: expect.stringMatching(/^[0-9a-f]{24}$/),
        userId: expect.stringMatching(/^[0-9a-f]{24}$/),
        eventSourceId: expect.any(String),
        payload: expect.objectContaining({ name: expect.any(String) }),
        tags: expect.arrayContaining(['custom']),
      });
    }
    const byKey = (key: string) => response.body.edges.find((record: { id: string }) => record.id === ids[key]);
    expect(byKey('alice-visit')).toEqual({
      id: ids['alice-visit'],
      nonce: 'n-1',
      createdAt: '2027-03-01T10:00:00.000Z',
      organisationId: acme.organisationId,
      communityId: coffee,
      userId: alice.id,
      eventSourceId: acme.tokenId,
      payload: { name: 'visit', store: 'Lisbon', total: 12 },
      tags: ['custom'],
    });
    expect(Object.keys(byKey('alice-visit').payload)[0]).toBe('name');
    // A payload key `name` cannot hide the event name.
    expect(byKey('bob-purchase')).toMatchObject({ nonce: null, userId: bob.id, communityId: tea, payload: { name: 'purchase', total: 30 } });
    // Logged by external id: the record names the platform user.
    expect(byKey('alice-purchase')).toMatchObject({ userId: alice.id, payload: { name: 'purchase' } });
    expect(byKey('alice-poster')).toEqual({
      id: ids['alice-poster'],
      nonce: null,
      createdAt: '2027-03-03T08:00:00.000Z',
      organisationId: acme.organisationId,
      communityId: coffee,
      userId: alice.id,
      eventSourceId: linkId,
      payload: { name: 'poster', wall: 'B' },
      tags: ['custom', 'link'],
    });
  });

  it('lists newest first, the id breaking a tie; never another organisation’s events', async () => {
    expect(await names('')).toEqual(newestFirst());
    const atBeta = await list('', beta);
    expect(atBeta.body).toMatchObject({ totalCount: 1, edges: [{ id: ids['beta-visit'], organisationId: beta.organisationId }] });
  });

  it('paginates: limit 1..100 (default 10), skip >= 0; out of range is a 400 with issues', async () => {
    const order = newestFirst();
    expect(await names('?limit=2')).toEqual(order.slice(0, 2));
    expect(await names('?limit=2&skip=2')).toEqual(order.slice(2, 4));
    expect(await names('?skip=4')).toEqual(order.slice(4));
    expect((await list('?skip=5')).body).toEqual({ totalCount: 5, edges: [] });
    expect((await list('?limit=1')).body.totalCount).toBe(5);
    for (const query of ['?limit=0', '?limit=101', '?skip=-1', '?limit=1.5', '?skip=x']) {
      const response = await list(query);
      expect(response.status, query).toBe(400);
      expect(response.body).toMatchObject({ code: 'BAD_REQUEST', message: 'Invalid input data' });
      expect(response.body.issues.length, query).toBeGreaterThan(0);
    }
  });

  it('filters by user (platform or external id), community, name and a half-open time range, combined', async () => {
    const order = newestFirst();
    const only = (...keys: string[]) => order.filter((key) => keys.includes(key));
    expect(await names(`?userId=${alice.id}`)).toEqual(only('alice-poster', 'alice-purchase', 'alice-visit'));
    expect(await names(`?userId=${alice.id.toUpperCase()}`)).toEqual(only('alice-poster', 'alice-purchase', 'alice-visit'));
    expect(await names('?userId=crm-bob')).toEqual(only('bob-visit', 'bob-purchase'));
    expect(await names(`?communityId=${tea}`)).toEqual(only('alice-purchase', 'bob-purchase'));
    expect(await names('?name=visit')).toEqual(only('bob-visit', 'alice-visit'));
    expect(await names('?name=poster')).toEqual(['alice-poster']);
    expect(await names('?name=Visit')).toEqual([]);
    // [from, to): an event at `from` is in, one at `to` is out.
    expect(await names('?from=2027-03-02T09:00:00Z')).toEqual(only('alice-poster', 'alice-purchase', 'bob-visit'));
    expect(await names('?to=2027-03-02T09:00:00Z')).toEqual(only('bob-purchase', 'alice-visit'));
    expect(await names('?from=2027-03-01&to=2027-03-02')).toEqual(only('bob-purchase', 'alice-visit'));
    expect(await names('?from=2027-03-01T12:00:00%2B01:00&to=2027-03-01T12:00:00%2B01:00')).toEqual([]);
    expect(await names(`?userId=crm-alice&communityId=${coffee}&name=visit&from=2027-03-01&to=2027-03-04`)).toEqual(['alice-visit']);
    const filtered = await list(`?userId=${bob.id}&limit=1`);
    expect(filtered.body.totalCount).toBe(2);
  });

  it('400 for malformed filters, 404 for a user or community the organisation does not have', async () => {
    for (const query of ['?communityId=nope', '?from=yesterday', '?to=2027-13-01', '?from=2027-03-02&to=2027-03-01', '?name=', `?userId=${'x'.repeat(201)}`]) {
      const response = await list(query);
      expect(response.status, query).toBe(400);
      expect(response.body.code).toBe('BAD_REQUEST');
      expect(response.body.issues.length, query).toBeGreaterThan(0);
    }
    for (const query of ['?userId=crm-nobody', '?userId=ffffffffffffffffffffffff', `?communityId=${'f'.repeat(24)}`]) {
      const response = await list(query);
      expect(response.status, query).toBe(404);
      expect(response.body.code).toBe('NOT_FOUND');
    }
    // Beta's user is unknown at Acme, even by an external id both organisations use.
    const betaUsers = await t.request('GET', '/api/v2/admin/users?externalUserId=crm-alice', asTenant(beta));
    expect((await list(`?userId=${betaUsers.body.edges[0].id}`)).status).toBe(404);
    expect(await names('?userId=crm-alice')).toEqual(newestFirst().filter((key) => key.startsWith('alice')));
  });

  it('401 without an API token or with another organisation’s; 403 with a token lacking the integration family', async () => {
    const anonymous = await t.request('GET', EVENTS, { host: acme.domain });
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.code).toBe('UNAUTHORIZED');
    expect((await t.request('GET', EVENTS, { host: acme.domain, headers: { 'x-api-token': beta.token } })).status).toBe(401);
    const adminOnly = await t.issueToken({ organisationId: acme.organisationId, name: 'admin only', families: ['admin', 'analytics'] });
    const forbidden = await t.request('GET', EVENTS, { host: acme.domain, headers: { 'x-api-token': adminOnly.token } });
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.code).toBe('FORBIDDEN');
    const integrationOnly = await t.issueToken({ organisationId: acme.organisationId, name: 'integration', families: ['integration'] });
    expect((await t.request('GET', EVENTS, { host: acme.domain, headers: { 'x-api-token': integrationOnly.token } })).status).toBe(200);
  });

  it('the integration OpenAPI 3.1 document lists every integration route with its schemas', async () => {
    const response = await t.request('GET', '/api/v2/integration/openapi.json', { host: acme.domain });
    expect(response.status).toBe(200);
    const document = response.body;
    expect(document.openapi).toBe('3.1.0');
    const operations = Object.entries(document.paths as Record<string, Record<string, unknown>>).flatMap(([path, methods]) =>
      Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`),
    );
    expect(operations.sort()).toEqual(
      [
        'GET /achievements',
        'GET /events',
        'GET /leaderboards/{leaderboardId}/standings',
        'GET /me',
        'GET /me/reward-assets',
        'GET /me/reward-entries',
        'POST /events/custom/links/redeem',
        'POST /me/reward-assets/{assetId}/claim',
        'POST /me/reward-assets/{assetId}/redeem',
      ].sort(),
    );
    // Each answers 200 with a JSON schema, and the errors with the contract's error body.
    for (const [path, methods] of Object.entries(document.paths as Record<string, Record<string, { responses: Record<string, any> }>>)) {
      for (const [method, operation] of Object.entries(methods)) {
        expect(operation.responses['200']?.content?.['application/json']?.schema, `${method} ${path}`).toBeDefined();
        expect(operation.responses['401'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Error' });
      }
    }
    const events = document.paths['/events'].get;
    expect(events.parameters.map((parameter: { name: string }) => parameter.name)).toEqual(
      expect.arrayContaining(['limit', 'skip', 'userId', 'communityId', 'name', 'from', 'to']),
    );
    const limit = events.parameters.find((parameter: { name: string }) => parameter.name === 'limit');
    expect(limit.schema).toMatchObject({ minimum: 1, maximum: 100, default: 10 });
    expect(events.responses['200'].content['application/json'].schema.properties.edges.items).toEqual({ $ref: '#/components/schemas/EventRecord' });
    const record = document.components.schemas.EventRecord;
    expect(record.required).toEqual(['id', 'nonce', 'createdAt', 'organisationId', 'communityId', 'userId', 'eventSourceId', 'payload', 'tags']);
    expect(record.properties.eventSourceId.description).toMatch(/API token.*custom event link/);
    expect(record.properties.tags.description).toMatch(/`link`/);
    for (const name of ['TeamMember', 'LeaderboardStandings', 'RewardEntry', 'RewardAsset', 'Achievement', 'EventRecord', 'Error']) {
      expect(document.components.schemas[name], name).toBeDefined();
    }
  });
});

describe('GET /integration/events: the size of a busy list', () => {
  let t: TestService;

  beforeAll(async () => {
    t = await startTestService({ jobs: false });
  }, 60_000);
  afterAll(async () => {
    await t.close();
  });

  it('counts every event of each list, logged in one batch', async () => {
    const busy = await t.createOrganisation('events-busy');
    const admin = adminOf(t, busy);
    const community = await admin.community('Busy');
    const [carol, dave] = [await admin.user('crm-carol', [community]), await admin.user('crm-dave', [community])];
    const body = Array.from({ length: 48 }, (_, n) => ({
      eventName: 'tap',
      userId: n % 3 === 0 ? dave.id : carol.id,
      communityId: community,
      nonce: `busy-${n}`,
    }));
    const logged = await t.request('POST', '/api/v2/admin/events/custom/batch', { ...asTenant(busy), body });
    expect(logged.status, JSON.stringify(logged.body)).toBe(200);
    await t.settle();

    const total = async (query: string) => {
      const response = await t.request('GET', `${EVENTS}?limit=1${query}`, asTenant(busy));
      expect(response.status, JSON.stringify(response.body)).toBe(200);
      return response.body.totalCount as number;
    };
    expect(await total('')).toBe(48);
    expect(await total('&name=tap')).toBe(48);
    expect(await total(`&communityId=${community}`)).toBe(48);
    expect(await total(`&userId=${dave.id}`)).toBe(16);
    expect(await total(`&userId=${carol.id}`)).toBe(32);
  });
});
