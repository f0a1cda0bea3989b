import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redemptionEventId } from '../command-api/custom-event-links.ts';
import type { CustomEventLinkEvent } from '../domain/custom-event-link.ts';
import { newId } from '../infra/ids.ts';
import { linkSigningKey, linkToken } from '../infra/link-signing.ts';
import { waitForProjections } from '../projectors/runtime/index.ts';
import { startTestService, type TestService, type Tenant } from './support/service.ts';

type Member = { id: string; externalUserId: string; userToken: string };
const CREATE = '/api/v2/admin/events/custom/link';
const REDEEM = '/api/v2/integration/events/custom/links/redeem';

describe('custom event links over HTTP', () => {
  let t: TestService;
  let acme: Tenant;
  let beta: Tenant;
  let community: string;
  let betaCommunity: string;
  let alice: Member;
  let bob: Member;
  let betaUser: Member;
  const as = (tenant: Tenant, extra: Record<string, string> = {}) => ({ host: tenant.domain, headers: { 'x-api-token': tenant.token, ...extra } });
  const valid = () => ({ eventName: 'scanned-poster', payload: { poster: 7, city: 'Lisbon' }, communityId: community, expiryTime: 3600 });
  const createLink = (body: unknown, tenant: Tenant = acme) => t.request('POST', CREATE, { ...as(tenant), body });
  const redeem = (token: string, member: Member, tenant: Tenant = acme) =>
    t.request('POST', REDEEM, { ...as(tenant, { authorization: `Bearer ${member.userToken}` }), body: { token } });
  const tokenOf = (url: string) => url.slice(url.indexOf('/l/') + 3);

  async function createCommunity(tenant: Tenant): Promise<string> {
    const response = await t.request('POST', '/api/v2/admin/communities', { ...as(tenant), body: { name: 'Runners' } });
    expect(response.status).toBe(201);
    return response.body.id;
  }

  async function createMember(tenant: Tenant, externalUserId: string): Promise<Member> {
    const created = await t.request('POST', '/api/v2/admin/users', { ...as(tenant), body: { externalUserId } });
    expect(created.status).toBe(201);
    const issued = await t.request('POST', `/api/v2/admin/users/${created.body.id}/tokens`, { ...as(tenant), body: {} });
    expect(issued.status).toBe(200);
    return { id: created.body.id, externalUserId, userToken: issued.body.token };
  }

  async function newLink(change: Record<string, unknown> = {}): Promise<string> {
    const response = await createLink({ ...valid(), ...change });
    expect(response.status).toBe(201);
    return tokenOf(response.body.url);
  }

  beforeAll(async () => {
    // No timed work: the expiry job would record an expired link's expiry while a test counts events.
    t = await startTestService({ jobs: false });
    acme = await t.createOrganisation('acme');
    beta = await t.createOrganisation('beta');
    community = await createCommunity(acme);
    betaCommunity = await createCommunity(beta);
    alice = await createMember(acme, 'crm-alice');
    bob = await createMember(acme, 'crm-bob');
    betaUser = await createMember(beta, 'crm-carol');
  });
  afterAll(async () => {
    await t.close();
  });

  describe('POST /events/custom/link', () => {
    it('201 with a signed URL on the organisation’s domain, and CustomEventLinkCreated on link-<id>', async () => {
      const before = await t.eventCount();
      const response = await createLink(valid());
      expect(response.status).toBe(201);
      expect(Object.keys(response.body)).toEqual(['url']);
      const match = /^https:\/\/acme\.engage\.test\/l\/([0-9a-f]{24})\.([A-Za-z0-9_-]{43})$/.exec(response.body.url);
      expect(match).not.toBeNull();
      const linkId = match![1]!;
      expect(response.headers['x-event-position']).toMatch(/^[0-9a-f]{32}$/);
      expect(await t.eventCount()).toBe(before + 1);

      const [stored] = await t.service.store.readStream(`link-${linkId}`);
      expect(stored!.type).toBe('CustomEventLinkCreated');
      const data = stored!.data as Extract<CustomEventLinkEvent, { type: 'CustomEventLinkCreated' }>['data'];
      expect(data).toEqual({
        linkId,
        organisationId: acme.organisationId,
        communityId: community,
        name: 'scanned-poster',
        payload: { poster: 7, city: 'Lisbon' },
        isSingleUse: true,
        expiresAt: new Date(Date.parse(data.createdAt) + 3600_000).toISOString(),
        createdBy: stored!.metadata.actor,
        createdAt: data.createdAt,
      });
      expect(tokenOf(response.body.url)).toBe(linkToken(linkSigningKey(t.service.config), linkId, data.expiresAt));

      expect(await waitForProjections(t.service.database.db, ['custom_event_links'], response.headers['x-event-position'] as never, 10_000)).toBe(true);
      const row = await t.service.database.db.selectFrom('custom_event_links').selectAll().where('id', '=', linkId).executeTakeFirst();
      expect(row).toMatchObject({ organisation_id: acme.organisationId, name: 'scanned-poster', is_single_use: true, redemption_count: 0 });
    });

    it('takes isSingleUse false, payload defaulting to {}, and the longest expiry', async () => {
      const response = await createLink({ eventName: 'x', communityId: community, expiryTime: 31_536_000, isSingleUse: false });
      expect(response.status).toBe(201);
      const linkId = tokenOf(response.body.url).split('.')[0]!;
      const [stored] = await t.service.store.readStream(`link-${linkId}`);
      expect(stored!.data).toMatchObject({ isSingleUse: false, payload: {} });
    });

    const invalid: [string, Record<string, unknown>, string][] = [
      ['eventName missing', { eventName: undefined }, 'eventName'],
      ['eventName empty', { eventName: '' }, 'eventName'],
      ['eventName over 200 characters', { eventName: 'x'.repeat(201) }, 'eventName'],
      ['payload an array', { payload: [] }, 'payload'],
      ['payload over 100 keys', { payload: Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`k${i}`, i])) }, 'payload'],
      ['communityId missing', { communityId: undefined }, 'communityId'],
      ['communityId not 24 hex', { communityId: 'nope' }, 'communityId'],
      ['expiryTime missing', { expiryTime: undefined }, 'expiryTime'],
      ['expiryTime zero', { expiryTime: 0 }, 'expiryTime'],
      ['expiryTime negative', { expiryTime: -5 }, 'expiryTime'],
      ['expiryTime over a year', { expiryTime: 31_536_001 }, 'expiryTime'],
      ['expiryTime not whole', { expiryTime: 1.5 }, 'expiryTime'],
      ['expiryTime a string', { expiryTime: '3600' }, 'expiryTime'],
      ['isSingleUse not a boolean', { isSingleUse: 'true' }, 'isSingleUse'],
      ['an unknown field', { userId: 'x' }, ''],
    ];
    it.each(invalid)('400 with issues and nothing appended: %s', async (_label, change, path) => {
      const before = await t.eventCount();
      const response = await createLink({ ...valid(), ...change });
      expect(response.status).toBe(400);
      expect(response.body.code).toBe('BAD_REQUEST');
      expect(response.body.issues.some((issue: { path: unknown[] }) => issue.path.join('.') === path)).toBe(true);
      expect(await t.eventCount()).toBe(before);
    });

    it('400 for a community the organisation does not have; 401 without a valid token', async () => {
      const before = await t.eventCount();
      expect((await createLink({ ...valid(), communityId: betaCommunity })).status).toBe(400);
      expect((await t.request('POST', CREATE, { host: acme.domain, body: valid() })).status).toBe(401);
      expect((await t.request('POST', CREATE, { host: beta.domain, headers: { 'x-api-token': acme.token }, body: valid() })).status).toBe(401);
      expect(await t.eventCount()).toBe(before);
    });
  });

  describe('POST /integration/events/custom/links/redeem', () => {
    it('logs the link’s event for the signed-in user, once: a second redemption answers the first and appends nothing', async () => {
      const token = await newLink();
      const linkId = token.split('.')[0]!;
      const before = await t.eventCount();
      const response = await redeem(token, alice);
      expect(response.status).toBe(200);
      expect(Object.keys(response.body).sort()).toEqual(['createdAt', 'externalUserId', 'id', 'name', 'payload', 'userId']);
      expect(response.body).toEqual({
        id: redemptionEventId(linkId, alice.id),
        name: 'scanned-poster',
        userId: alice.id,
        externalUserId: 'crm-alice',
        payload: { poster: 7, city: 'Lisbon' },
        createdAt: response.body.createdAt,
      });
      expect(await t.eventCount()).toBe(before + 2);
      const link = await t.service.store.readStream(`link-${linkId}`);
      expect(link.map((event) => event.type)).toEqual(['CustomEventLinkCreated', 'CustomEventLinkRedeemed']);
      expect(link[1]!.data).toEqual({
        linkId,
        organisationId: acme.organisationId,
        userId: alice.id,
        externalUserId: 'crm-alice',
        eventId: response.body.id,
        redeemedAt: response.body.createdAt,
      });
      const [logged] = await t.service.store.readStream(`customevent-${response.body.id}`);
      expect(logged!.data).toEqual({
        eventId: response.body.id,
        organisationId: acme.organisationId,
        communityId: community,
        userId: alice.id,
        externalUserId: 'crm-alice',
        name: 'scanned-poster',
        payload: { poster: 7, city: 'Lisbon' },
        nonce: null,
        source: { type: 'link', linkId },
        occurredAt: response.body.createdAt,
      });

      const position = response.headers['x-event-position'] as string;
      expect(await waitForProjections(t.service.database.db, ['custom_events', 'custom_event_links'], position as never, 10_000)).toBe(true);
      const row = await t.service.database.db.selectFrom('custom_events').selectAll().where('id', '=', response.body.id).executeTakeFirst();
      expect(row).toMatchObject({ user_id: alice.id, event_source_id: linkId, source_type: 'link', tags: ['custom', 'link'] });
      const linkRow = await t.service.database.db.selectFrom('custom_event_links').selectAll().where('id', '=', linkId).executeTakeFirst();
      expect(linkRow!.redemption_count).toBe(1);

      const again = await redeem(token, alice);
      expect(again.status).toBe(200);
      expect(again.body).toEqual(response.body);
      expect(again.headers['x-event-position']).toBeUndefined();
      expect(await t.eventCount()).toBe(before + 2);
    });

    it('a single-use link redeemed by a second user is a 409, and appends nothing', async () => {
      const token = await newLink();
      expect((await redeem(token, alice)).status).toBe(200);
      const before = await t.eventCount();
      const second = await redeem(token, bob);
      expect(second.status).toBe(409);
      expect(second.body.code).toBe('CONFLICT');
      expect(await t.eventCount()).toBe(before);
    });

    it('a multi-use link logs an event for every user, once each', async () => {
      const token = await newLink({ isSingleUse: false });
      const first = await redeem(token, alice);
      const second = await redeem(token, bob);
      expect([first.status, second.status]).toEqual([200, 200]);
      expect(second.body.userId).toBe(bob.id);
      expect(second.body.id).not.toBe(first.body.id);
      const before = await t.eventCount();
      expect((await redeem(token, bob)).body).toEqual(second.body);
      expect(await t.eventCount()).toBe(before);
    });

    it('a multi-use link redeemed by ten users at once logs ten events, one each, and refuses none', async () => {
      const token = await newLink({ isSingleUse: false });
      const members = await Promise.all(Array.from({ length: 10 }, (_, i) => createMember(acme, `crowd-${i}`)));
      const responses = await Promise.all(members.map((member) => redeem(token, member)));
      expect(responses.map((response) => response.status)).toEqual(Array(10).fill(200));
      expect(new Set(responses.map((response) => response.body.userId))).toEqual(new Set(members.map((member) => member.id)));
      expect(new Set(responses.map((response) => response.body.id)).size).toBe(10);
    });

    it('404 for a token that is malformed, of an unknown link, with a wrong signature, or of another organisation', async () => {
      const token = await newLink();
      const [linkId, signature] = token.split('.') as [string, string];
      // A character in the middle: the last one carries two padding bits, so some changes to it decode to the same bytes.
      const flipped = `${linkId}.${signature.slice(0, 10)}${signature[10] === 'A' ? 'B' : 'A'}${signature.slice(11)}`;
      const before = await t.eventCount();
      for (const bad of ['garbage', linkId, flipped, `${newId()}.${signature}`, `${linkId}.${signature}x`]) {
        const response = await redeem(bad, alice);
        expect(response.status, bad).toBe(404);
        expect(response.body.code).toBe('NOT_FOUND');
      }
      expect((await redeem(token, betaUser, beta)).status).toBe(404);
      expect(await t.eventCount()).toBe(before);
    });

    it('410 GONE for an expired link, and nothing appended', async () => {
      const linkId = newId();
      const createdAt = '2026-01-01T00:00:00.000Z';
      const expiresAt = '2026-01-01T00:00:10.000Z';
      await t.service.store.appendMultiple([
        {
          stream: `link-${linkId}`,
          expectedRevision: 'no_stream',
          events: [
            {
              type: 'CustomEventLinkCreated',
              data: {
                linkId,
                organisationId: acme.organisationId,
                communityId: community,
                name: 'old',
                payload: {},
                isSingleUse: true,
                expiresAt,
                createdBy: 'test',
                createdAt,
              },
              metadata: { organisationId: acme.organisationId, actor: 'test', occurredAt: createdAt },
            },
          ],
        },
      ]);
      const before = await t.eventCount();
      const response = await redeem(linkToken(linkSigningKey(t.service.config), linkId, expiresAt), alice);
      expect(response.status).toBe(410);
      expect(response.body).toEqual({ message: `This link expired at ${expiresAt}`, code: 'GONE' });
      expect(await t.eventCount()).toBe(before);
      // A token signed for another expiry does not pass for this link.
      expect((await redeem(linkToken(linkSigningKey(t.service.config), linkId, '2099-01-01T00:00:00.000Z'), alice)).status).toBe(404);
    });

    it('401 without a user token, with a bad one, with another organisation’s, or without an API token', async () => {
      const token = await newLink();
      const before = await t.eventCount();
      const none = await t.request('POST', REDEEM, { ...as(acme), body: { token } });
      expect(none.status).toBe(401);
      expect(none.body.code).toBe('UNAUTHORIZED');
      expect((await t.request('POST', REDEEM, { ...as(acme, { authorization: 'Bearer nope' }), body: { token } })).status).toBe(401);
      expect((await t.request('POST', REDEEM, { ...as(acme, { authorization: `Bearer ${betaUser.userToken}` }), body: { token } })).status).toBe(401);
      expect((await t.request('POST', REDEEM, { host: acme.domain, headers: { authorization: `Bearer ${alice.userToken}` }, body: { token } })).status).toBe(
        401,
      );
      expect(await t.eventCount()).toBe(before);
    });

    it('400 for a body without a token', async () => {
      for (const body of [{}, { token: '' }, { token: 5 }, { token: 'x', extra: 1 }]) {
        const response = await t.request('POST', REDEEM, { ...as(acme, { authorization: `Bearer ${alice.userToken}` }), body });
        expect(response.status).toBe(400);
        expect(response.body.code).toBe('BAD_REQUEST');
      }
    });

    it('two users racing on a single-use link: exactly one wins, the others get 409', async () => {
      const racers = [alice, bob, ...(await Promise.all([1, 2, 3, 4].map((i) => createMember(acme, `crm-racer-${i}`))))];
      const token = await newLink();
      const linkId = token.split('.')[0]!;
      const responses = await Promise.all(racers.map((member) => redeem(token, member)));
      expect(responses.map((r) => r.status).sort()).toEqual([200, 409, 409, 409, 409, 409]);
      const link = await t.service.store.readStream(`link-${linkId}`);
      expect(link.filter((event) => event.type === 'CustomEventLinkRedeemed')).toHaveLength(1);
      const winner = responses.find((r) => r.status === 200)!.body;
      expect((link[1]!.data as { userId: string }).userId).toBe(winner.userId);
      const logged = await Promise.all(racers.map((member) => t.service.store.readStream(`customevent-${redemptionEventId(linkId, member.id)}`)));
      expect(logged.flat()).toHaveLength(1);
    });

    it('the same user redeeming concurrently logs one event and every request gets it', async () => {
      const token = await newLink({ isSingleUse: false });
      const linkId = token.split('.')[0]!;
      const responses = await Promise.all(Array.from({ length: 6 }, () => redeem(token, alice)));
      expect(responses.map((r) => r.status)).toEqual(Array(6).fill(200));
      for (const response of responses) expect(response.body).toEqual(responses[0]!.body);
      const link = await t.service.store.readStream(`link-${linkId}`);
      expect(link.filter((event) => event.type === 'CustomEventLinkRedeemed')).toHaveLength(1);
      expect(await t.service.store.readStream(`customevent-${responses[0]!.body.id}`)).toHaveLength(1);
    });

    it('is described in the integration OpenAPI document with its 404, 409 and 410', async () => {
      const response = await t.request('GET', '/api/v2/integration/openapi.json', { host: acme.domain });
      const operation = response.body.paths['/events/custom/links/redeem'].post;
      expect(Object.keys(operation.responses)).toEqual(expect.arrayContaining(['200', '400', '401', '404', '409', '410']));
    });
  });
});
