import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../infra/ids.ts';
import { startTestService, type TestService, type Tenant } from './support/service.ts';

const community = 'aaaaaaaaaaaaaaaaaaaaaaaa';
const otherCommunity = 'AAAAAAAAAAAAAAAAAAAAAAAB';
const noImages = { primaryImageUrl: '', secondaryImageUrl: '' };
const details = {
  en: {
    title: 'Trip to Lisbon',
    description: 'Two nights for two',
    light: { primaryImageUrl: 'https://cdn.example.com/light.png', secondaryImageUrl: 'https://cdn.example.com/light-2.png' },
    dark: { primaryImageUrl: 'https://cdn.example.com/dark.png', secondaryImageUrl: 'https://cdn.example.com/dark-2.png' },
  },
  'pt-PT': { title: 'Viagem a Lisboa' },
};
const entries = {
  kind: 'entries',
  communityId: community,
  details,
  tags: ['travel'],
  campaigns: ['spring'],
  additionalCommunityIds: [otherCommunity],
  metadata: { sponsor: 'TAP', nested: { tier: 1 } },
  drawsAt: '2099-04-01T12:00:00+02:00',
  supply: 3,
};
const redeemable = {
  additionalInformation: [{ variableConfigId: 'b'.repeat(24), required: true, position: 0 }],
  content: 'Show this at the desk',
  instructions: 'Book by e-mail',
  instructionsImageUrl: 'https://cdn.example.com/how.png',
  supportUrl: 'https://help.example.com',
  supportEmail: 'help@example.com',
  supportPhoneNumber: '+351 21 000 0000',
  redeemByDate: '2099-12-31',
};
const asset = {
  kind: 'asset',
  communityId: community,
  details: { en: details.en },
  redeemable,
  codes: ['LIS-1', 'LIS-2', 'LIS-3'],
  expiresAt: '2099-06-30T00:00:00Z',
};

type Org = Tenant;

describe('rewards over HTTP', () => {
  let t: TestService;
  let acme: Org;
  let beta: Org;
  const as = (org: Org, extra: Record<string, string> = {}) => ({ host: org.domain, headers: { 'x-api-token': org.token, ...extra } });
  const asAcme = (extra: Record<string, string> = {}) => as(acme, extra);
  const position = (response: { headers: Record<string, unknown> }) => response.headers['x-event-position'] as string;
  let lastWrite: string | null = null;
  const remember = (written: string | undefined) => {
    if (written && (lastWrite === null || written > lastWrite)) lastWrite = written;
  };
  /** A write through HTTP, remembering where it landed so `settledEventCount` can wait for it. */
  const write = async (...args: Parameters<TestService['request']>) => {
    const response = await t.request(...args);
    remember(position(response));
    return response;
  };
  const create = (body: unknown, org: Org = acme) => write('POST', '/api/v2/admin/rewards', { ...as(org), body });
  const allocate = (rewardId: string, body: unknown, org: Org = acme) => write('POST', `/api/v2/admin/rewards/${rewardId}/allocations`, { ...as(org), body });
  /**
   * The number of events once every earlier write counts: a committed event is only visible to readers once
   * no older transaction is still running, so first wait (x-min-position) until the read models have passed
   * the last write.
   */
  const settledEventCount = async () => {
    if (lastWrite !== null) {
      const read = await t.request('GET', '/api/v2/admin/rewards?limit=1', asAcme({ 'x-min-position': lastWrite }));
      expect(read.status).toBe(200);
    }
    return t.eventCount();
  };

  beforeAll(async () => {
    // No timed work: the giveaway seeded with a past draw date would be drawn while tests count events.
    t = await startTestService({ jobs: false });
    acme = await t.createOrganisation('acme');
    beta = await t.createOrganisation('beta');
  });
  afterAll(async () => {
    await t.close();
  });

  describe('POST /rewards', () => {
    it('creates an entries reward: 201 with the full reward, and the position it wrote', async () => {
      const response = await create(entries);
      expect(response.status).toBe(201);
      const reward = response.body;
      expect(Object.keys(reward).sort()).toEqual(
        [
          'additionalCommunityIds',
          'campaigns',
          'communityId',
          'createdAt',
          'createdBy',
          'details',
          'drawsAt',
          'id',
          'kind',
          'metadata',
          'organisationId',
          'supply',
          'tags',
          'updatedAt',
          'updatedBy',
        ].sort(),
      );
      expect(reward.id).toMatch(/^[0-9a-f]{24}$/);
      expect(reward.organisationId).toBe(acme.organisationId);
      expect(reward.communityId).toBe(community);
      expect(reward.kind).toBe('entries');
      expect(reward.details).toEqual({ en: details.en, 'pt-PT': { title: 'Viagem a Lisboa', description: '', light: noImages, dark: noImages } });
      expect(reward.tags).toEqual(['travel']);
      expect(reward.campaigns).toEqual(['spring']);
      expect(reward.additionalCommunityIds).toEqual([otherCommunity.toLowerCase()]);
      expect(reward.metadata).toEqual({ sponsor: 'TAP', nested: { tier: 1 } });
      expect(reward.drawsAt).toBe('2099-04-01T10:00:00.000Z');
      expect(reward.supply).toBe(3);
      expect(Number.isNaN(Date.parse(reward.createdAt))).toBe(false);
      expect(reward.updatedAt).toBe(reward.createdAt);
      expect(reward.createdBy).toMatch(/^[0-9a-f]{24}$/);
      expect(reward.updatedBy).toBe(reward.createdBy);
      expect(position(response)).toMatch(/^[0-9a-f]{32}$/);

      const stored = await t.service.store.readStream(`reward-${reward.id}`);
      expect(stored.map((event) => event.type)).toEqual(['RewardCreated']);
      expect(stored[0]!.metadata).toMatchObject({
        organisationId: acme.organisationId,
        actor: reward.createdBy,
        causationId: response.headers['x-request-id'],
      });

      const read = await t.request('GET', `/api/v2/admin/rewards/${reward.id}`, asAcme({ 'x-min-position': position(response) }));
      expect(read.status).toBe(200);
      expect(read.body).toEqual(reward);
    });

    it('creates an asset reward: 201 with its redeemable and the number of codes, never the codes', async () => {
      const response = await create(asset);
      expect(response.status).toBe(201);
      const reward = response.body;
      expect(Object.keys(reward).sort()).toEqual(
        [
          'additionalCommunityIds',
          'campaigns',
          'codeCount',
          'communityId',
          'createdAt',
          'createdBy',
          'details',
          'expiresAt',
          'id',
          'kind',
          'metadata',
          'organisationId',
          'redeemable',
          'tags',
          'updatedAt',
          'updatedBy',
        ].sort(),
      );
      expect(reward.kind).toBe('asset');
      expect(reward.redeemable).toEqual({ ...redeemable, redeemByDate: '2099-12-31T00:00:00.000Z' });
      expect(reward.codeCount).toBe(3);
      expect(reward.expiresAt).toBe('2099-06-30T00:00:00.000Z');
      expect(reward.tags).toEqual([]);
      expect(reward.campaigns).toEqual([]);
      expect(reward.additionalCommunityIds).toEqual([]);
      expect(reward.metadata).toEqual({});
      expect(JSON.stringify(reward)).not.toContain('LIS-1');
      const [created] = await t.service.store.readStream(`reward-${reward.id}`);
      expect((created!.data as { codes: string[] }).codes).toEqual(asset.codes);

      const read = await t.request('GET', `/api/v2/admin/rewards/${reward.id}`, asAcme({ 'x-min-position': position(response) }));
      expect(read.body).toEqual(reward);
    });

    it('applies the defaults: no redeemable fields, no codes, no expiry', async () => {
      const response = await create({ kind: 'asset', communityId: community, details: { en: { title: 'Sticker' } } });
      expect(response.status).toBe(201);
      expect(response.body).toMatchObject({
        redeemable: {
          additionalInformation: [],
          content: null,
          instructions: null,
          instructionsImageUrl: null,
          supportUrl: null,
          supportEmail: null,
          supportPhoneNumber: null,
          redeemByDate: null,
        },
        codeCount: null,
        expiresAt: null,
        details: { en: { title: 'Sticker', description: '', light: noImages, dark: noImages } },
      });
    });

    const invalid: [string, unknown, string][] = [
      ['kind missing', { ...entries, kind: undefined }, 'kind'],
      ['kind unknown', { ...entries, kind: 'points' }, 'kind'],
      ['communityId missing', { ...entries, communityId: undefined }, 'communityId'],
      ['communityId not 24 hex', { ...entries, communityId: 'community-1' }, 'communityId'],
      ['details missing', { ...entries, details: undefined }, 'details'],
      ['details without a language', { ...entries, details: {} }, 'details'],
      ['details under a key that is not a language', { ...entries, details: { English: details.en } }, 'details.English'],
      ['details without a title', { ...entries, details: { en: { description: 'x' } } }, 'details.en.title'],
      ['details with an empty title', { ...entries, details: { en: { title: ' ' } } }, 'details.en.title'],
      ['details image not a URL', { ...entries, details: { en: { title: 'x', light: { primaryImageUrl: 'cat.png' } } } }, 'details.en.light.primaryImageUrl'],
      ['tags not an array', { ...entries, tags: 'travel' }, 'tags'],
      ['a tag not a string', { ...entries, tags: [5] }, 'tags.0'],
      ['campaigns with an empty one', { ...entries, campaigns: [''] }, 'campaigns.0'],
      ['additionalCommunityIds not 24 hex', { ...entries, additionalCommunityIds: ['x'] }, 'additionalCommunityIds.0'],
      ['metadata not an object', { ...entries, metadata: ['a'] }, 'metadata'],
      ['an unknown field', { ...entries, status: 'live' }, ''],
      ['entries: drawsAt missing', { ...entries, drawsAt: undefined }, 'drawsAt'],
      ['entries: drawsAt not a date', { ...entries, drawsAt: 'next friday' }, 'drawsAt'],
      ['entries: drawsAt in the past', { ...entries, drawsAt: '2020-01-01T00:00:00Z' }, 'drawsAt'],
      ['entries: supply missing', { ...entries, supply: undefined }, 'supply'],
      ['entries: supply 0', { ...entries, supply: 0 }, 'supply'],
      ['entries: supply fractional', { ...entries, supply: 1.5 }, 'supply'],
      ['entries: an asset field', { ...entries, codes: ['A'] }, ''],
      ['asset: drawsAt', { ...asset, drawsAt: entries.drawsAt }, ''],
      ['asset: codes empty', { ...asset, codes: [] }, 'codes'],
      ['asset: codes with a duplicate', { ...asset, codes: ['A', 'B', 'A'] }, 'codes.2'],
      ['asset: a code not a string', { ...asset, codes: [7] }, 'codes.0'],
      ['asset: expiresAt not a date', { ...asset, expiresAt: '30/06/2099' }, 'expiresAt'],
      ['asset: supportEmail not an e-mail address', { ...asset, redeemable: { ...redeemable, supportEmail: 'help' } }, 'redeemable.supportEmail'],
      ['asset: supportUrl not a URL', { ...asset, redeemable: { ...redeemable, supportUrl: 'help page' } }, 'redeemable.supportUrl'],
      ['asset: supportPhoneNumber not a number', { ...asset, redeemable: { ...redeemable, supportPhoneNumber: 'call us' } }, 'redeemable.supportPhoneNumber'],
      ['asset: redeemByDate not a date', { ...asset, redeemable: { ...redeemable, redeemByDate: 'soon' } }, 'redeemable.redeemByDate'],
      [
        'asset: additionalInformation without a position',
        { ...asset, redeemable: { ...redeemable, additionalInformation: [{ variableConfigId: 'b'.repeat(24) }] } },
        'redeemable.additionalInformation.0.position',
      ],
      [
        'asset: additionalInformation variableConfigId not 24 hex',
        { ...asset, redeemable: { ...redeemable, additionalInformation: [{ variableConfigId: 'v1', position: 0 }] } },
        'redeemable.additionalInformation.0.variableConfigId',
      ],
      ['a body that is not an object', ['reward'], ''],
    ];

    it.each(invalid)('%s → 400 with issues, and no event appended', async (_case, body, path) => {
      const before = await settledEventCount();
      const response = await create(body);
      expect(response.status).toBe(400);
      expect(response.body.code).toBe('BAD_REQUEST');
      expect(response.body.message).toBe('Invalid input data');
      expect(response.body.issues.length).toBeGreaterThan(0);
      expect(response.body.issues.map((issue: { path: unknown[] }) => issue.path.join('.'))).toContain(path);
      expect(await t.eventCount()).toBe(before);
    });
  });

  it('401 without a token, on every endpoint, and nothing appended', async () => {
    const before = await settledEventCount();
    const id = 'f'.repeat(24);
    for (const [method, path, body] of [
      ['POST', '/api/v2/admin/rewards', entries],
      ['GET', '/api/v2/admin/rewards', undefined],
      ['GET', `/api/v2/admin/rewards/${id}`, undefined],
      ['PATCH', `/api/v2/admin/rewards/${id}`, { tags: [] }],
      ['POST', `/api/v2/admin/rewards/${id}/allocations`, { supply: 1 }],
      ['GET', `/api/v2/admin/rewards/${id}/allocations`, undefined],
    ] as const) {
      const response = await t.request(method, path, { host: acme.domain, body });
      expect(response.status, `${method} ${path}`).toBe(401);
      expect(response.body.code).toBe('UNAUTHORIZED');
      const wrong = await t.request(method, path, { host: acme.domain, headers: { 'x-api-token': beta.token }, body });
      expect(wrong.status, `${method} ${path} with another organisation's token`).toBe(401);
    }
    expect(await t.eventCount()).toBe(before);
  });

  describe('GET /rewards', () => {
    it('lists newest first, paginated, filtered by kind and community', async () => {
      const org = await t.createOrganisation('lister');
      const ids: string[] = [];
      const kinds: string[] = [];
      let last = '';
      for (let i = 0; i < 12; i++) {
        const kind = i % 3 === 0 ? 'asset' : 'entries';
        const body =
          kind === 'asset' ? { ...asset, communityId: i < 6 ? community : otherCommunity } : { ...entries, communityId: i < 6 ? community : otherCommunity };
        const created = await create(body, org);
        expect(created.status).toBe(201);
        ids.push(created.body.id);
        kinds.push(kind);
        last = position(created);
      }
      const newestFirst = [...ids].reverse();
      const first = await t.request('GET', '/api/v2/admin/rewards', as(org, { 'x-min-position': last }));
      expect(first.status).toBe(200);
      expect(first.body.totalCount).toBe(12);
      expect(first.body.edges.map((edge: { id: string }) => edge.id)).toEqual(newestFirst.slice(0, 10));
      const second = await t.request('GET', '/api/v2/admin/rewards?limit=5&skip=10', as(org));
      expect(second.body).toMatchObject({ totalCount: 12 });
      expect(second.body.edges.map((edge: { id: string }) => edge.id)).toEqual([ids[1], ids[0]]);

      const assets = await t.request('GET', '/api/v2/admin/rewards?kind=asset&limit=100', as(org));
      expect(assets.body.totalCount).toBe(4);
      expect(assets.body.edges.map((edge: { id: string }) => edge.id)).toEqual(newestFirst.filter((id) => kinds[ids.indexOf(id)] === 'asset'));
      const inOther = await t.request('GET', `/api/v2/admin/rewards?communityId=${otherCommunity}&limit=100`, as(org));
      expect(inOther.body.totalCount).toBe(6);
      expect(inOther.body.edges.map((edge: { id: string }) => edge.id)).toEqual(newestFirst.slice(0, 6));
      const both = await t.request('GET', `/api/v2/admin/rewards?communityId=${community}&kind=entries&limit=2`, as(org));
      expect(both.body.totalCount).toBe(4);
      expect(both.body.edges.map((edge: { id: string }) => edge.id)).toEqual([ids[5], ids[4]]);
      expect(both.body.edges.every((edge: { kind: string; communityId: string }) => edge.kind === 'entries' && edge.communityId === community)).toBe(true);

      for (const query of ['limit=0', 'limit=101', 'skip=-1', 'limit=2.5', 'kind=points', 'communityId=abc']) {
        const response = await t.request('GET', `/api/v2/admin/rewards?${query}`, as(org));
        expect(response.status, query).toBe(400);
        expect(response.body.code).toBe('BAD_REQUEST');
        expect(response.body.issues.length).toBeGreaterThan(0);
      }
    });

    it('never shows one organisation another’s rewards', async () => {
      const created = await create(entries);
      const asBeta = as(beta, { 'x-min-position': position(created) });
      expect((await t.request('GET', `/api/v2/admin/rewards/${created.body.id}`, asBeta)).status).toBe(404);
      const list = await t.request('GET', '/api/v2/admin/rewards?limit=100', asBeta);
      expect(list.status).toBe(200);
      expect(list.body.edges.map((edge: { id: string }) => edge.id)).not.toContain(created.body.id);
      expect(list.body.edges.every((edge: { organisationId: string }) => edge.organisationId === beta.organisationId)).toBe(true);
    });
  });

  describe('GET /rewards/{id}', () => {
    it('an unknown reward or an id that cannot be one → 404 NOT_FOUND', async () => {
      for (const id of ['f'.repeat(24), 'not-an-id']) {
        const response = await t.request('GET', `/api/v2/admin/rewards/${id}`, asAcme());
        expect(response.status, id).toBe(404);
        expect(response.body).toMatchObject({ code: 'NOT_FOUND' });
      }
    });
  });

  describe('PATCH /rewards/{id}', () => {
    it('changes details, tags and the draw date: 200 with the whole reward, only the differences recorded', async () => {
      const created = await create(entries);
      const newDetails = { fr: { title: 'Voyage à Lisbonne' } };
      const response = await write('PATCH', `/api/v2/admin/rewards/${created.body.id}`, {
        ...asAcme(),
        body: { details: newDetails, tags: ['travel'], drawsAt: '2099-05-01T00:00:00Z' },
      });
      expect(response.status).toBe(200);
      expect(response.body).toEqual({
        ...created.body,
        details: { fr: { title: 'Voyage à Lisbonne', description: '', light: noImages, dark: noImages } },
        drawsAt: '2099-05-01T00:00:00.000Z',
        updatedAt: response.body.updatedAt,
      });
      expect(Date.parse(response.body.updatedAt)).toBeGreaterThanOrEqual(Date.parse(created.body.createdAt));
      expect(response.body.updatedBy).toBe(created.body.createdBy);
      const stored = await t.service.store.readStream(`reward-${created.body.id}`);
      expect(stored.map((event) => event.type)).toEqual(['RewardCreated', 'RewardUpdated']);
      expect(Object.keys((stored[1]!.data as { changes: object }).changes).sort()).toEqual(['details', 'drawsAt']);

      const read = await t.request('GET', `/api/v2/admin/rewards/${created.body.id}`, asAcme({ 'x-min-position': position(response) }));
      expect(read.body).toEqual(response.body);
    });

    it("sets and removes an asset reward's expiry", async () => {
      const created = await create(asset);
      const removed = await write('PATCH', `/api/v2/admin/rewards/${created.body.id}`, { ...asAcme(), body: { expiresAt: null } });
      expect(removed.status).toBe(200);
      expect(removed.body.expiresAt).toBeNull();
      const set = await write('PATCH', `/api/v2/admin/rewards/${created.body.id}`, { ...asAcme(), body: { expiresAt: '2099-01-01' } });
      expect(set.body.expiresAt).toBe('2099-01-01T00:00:00.000Z');
      const read = await t.request('GET', `/api/v2/admin/rewards/${created.body.id}`, asAcme({ 'x-min-position': position(set) }));
      expect(read.body).toEqual(set.body);
    });

    it('a change to nothing new → 200 with the reward, and no event', async () => {
      const created = await create(entries);
      const before = await settledEventCount();
      const response = await write('PATCH', `/api/v2/admin/rewards/${created.body.id}`, { ...asAcme(), body: { tags: ['travel'] } });
      expect(response.status).toBe(200);
      expect(response.body).toEqual(created.body);
      expect(await t.eventCount()).toBe(before);
    });

    const invalid: [string, unknown, string][] = [
      ['an empty body', {}, ''],
      ['an unknown field', { kind: 'asset' }, ''],
      ['communityId (cannot change)', { communityId: community }, ''],
      ['details without a language', { details: {} }, 'details'],
      ['details without a title', { details: { en: {} } }, 'details.en.title'],
      ['tags not an array', { tags: 'x' }, 'tags'],
      ['drawsAt not a date', { drawsAt: 'tomorrow' }, 'drawsAt'],
      ['drawsAt in the past', { drawsAt: '2020-01-01T00:00:00Z' }, 'drawsAt'],
      ['expiresAt not a date', { expiresAt: 'never' }, 'expiresAt'],
    ];

    it.each(invalid)('%s → 400 with issues, and no event appended', async (_case, body, path) => {
      const created = await create(entries);
      const before = await settledEventCount();
      const response = await write('PATCH', `/api/v2/admin/rewards/${created.body.id}`, { ...asAcme(), body });
      expect(response.status).toBe(400);
      expect(response.body.code).toBe('BAD_REQUEST');
      expect(response.body.issues.map((issue: { path: unknown[] }) => issue.path.join('.'))).toContain(path);
      expect(await t.eventCount()).toBe(before);
    });

    it('a date of the other kind → 400: drawsAt on an asset reward, expiresAt on an entries reward', async () => {
      const assetReward = await create(asset);
      const entriesReward = await create(entries);
      const before = await settledEventCount();
      const drawsAt = await write('PATCH', `/api/v2/admin/rewards/${assetReward.body.id}`, { ...asAcme(), body: { drawsAt: '2099-05-01T00:00:00Z' } });
      expect(drawsAt.status).toBe(400);
      expect(drawsAt.body.issues[0].message).toMatch(/drawsAt applies to entries rewards/);
      const expiresAt = await write('PATCH', `/api/v2/admin/rewards/${entriesReward.body.id}`, {
        ...asAcme(),
        body: { expiresAt: '2099-05-01T00:00:00Z' },
      });
      expect(expiresAt.status).toBe(400);
      expect(expiresAt.body.issues[0].message).toMatch(/expiresAt applies to asset rewards/);
      expect(await t.eventCount()).toBe(before);
    });

    it('an unknown reward, an id that cannot be one, or another organisation’s → 404, nothing appended', async () => {
      const created = await create(entries);
      const before = await settledEventCount();
      for (const [id, org] of [
        ['f'.repeat(24), acme],
        ['nope', acme],
        [created.body.id, beta],
      ] as const) {
        const response = await write('PATCH', `/api/v2/admin/rewards/${id}`, { ...as(org), body: { tags: ['x'] } });
        expect(response.status, id).toBe(404);
        expect(response.body.code).toBe('NOT_FOUND');
      }
      expect(await t.eventCount()).toBe(before);
    });

    it('a giveaway whose draw is due or done refuses a new draw date (409) but takes new details and tags', async () => {
      const rewardId = await seedPastGiveaway();
      const before = await settledEventCount();
      const moved = await write('PATCH', `/api/v2/admin/rewards/${rewardId}`, { ...asAcme(), body: { drawsAt: '2099-05-01T00:00:00Z' } });
      expect(moved.status).toBe(409);
      expect(moved.body).toEqual({ message: 'The draw is due or done: its date can no longer change', code: 'CONFLICT' });
      expect(await t.eventCount()).toBe(before);
      const tagged = await write('PATCH', `/api/v2/admin/rewards/${rewardId}`, { ...asAcme(), body: { tags: ['archive'] } });
      expect(tagged.status).toBe(200);
      expect(tagged.body.tags).toEqual(['archive']);
    });
  });

  describe('allocations', () => {
    it('POST /rewards/{id}/allocations → 201 with the allocation, on its own stream; GET lists them newest first', async () => {
      const reward = await create(entries);
      const response = await allocate(reward.body.id, { supply: 100, amountToDistribute: 5 });
      expect(response.status).toBe(201);
      const allocation = response.body;
      expect(Object.keys(allocation).sort()).toEqual(['amountToDistribute', 'distributed', 'id', 'isLive', 'rewardId', 'supply']);
      expect(allocation.id).toMatch(/^[0-9a-f]{24}$/);
      expect(allocation.rewardId).toBe(reward.body.id);
      expect(allocation.supply).toBe(100);
      expect(allocation.amountToDistribute).toBe(5);
      expect(allocation.distributed).toBe(0);
      expect(allocation.isLive).toBe(true);
      expect(position(response)).toMatch(/^[0-9a-f]{32}$/);
      expect((await t.service.store.readStream(`allocation-${allocation.id}`)).map((event) => event.type)).toEqual(['AllocationCreated']);
      expect((await t.service.store.readStream(`reward-${reward.body.id}`)).map((event) => event.type)).toEqual(['RewardCreated', 'RewardAllocationAdded']);

      const defaulted = await allocate(reward.body.id, { supply: 0 });
      expect(defaulted.status).toBe(201);
      expect(defaulted.body).toMatchObject({ supply: 0, amountToDistribute: 1, distributed: 0, isLive: false });

      const list = await t.request('GET', `/api/v2/admin/rewards/${reward.body.id}/allocations`, asAcme({ 'x-min-position': position(defaulted) }));
      expect(list.status).toBe(200);
      expect(list.body).toEqual({ totalCount: 2, edges: [defaulted.body, allocation] });
      const paged = await t.request('GET', `/api/v2/admin/rewards/${reward.body.id}/allocations?limit=1&skip=1`, asAcme());
      expect(paged.body).toEqual({ totalCount: 2, edges: [allocation] });
      for (const query of ['limit=0', 'limit=101', 'skip=-1']) {
        expect((await t.request('GET', `/api/v2/admin/rewards/${reward.body.id}/allocations?${query}`, asAcme())).status, query).toBe(400);
      }
    });

    it('a reward without allocations lists none', async () => {
      const reward = await create(entries);
      const list = await t.request('GET', `/api/v2/admin/rewards/${reward.body.id}/allocations`, asAcme({ 'x-min-position': position(reward) }));
      expect(list.body).toEqual({ totalCount: 0, edges: [] });
    });

    it('an asset reward with codes takes allocations up to its number of codes, then 400', async () => {
      const reward = await create(asset);
      expect((await allocate(reward.body.id, { supply: 2 })).status).toBe(201);
      const before = await settledEventCount();
      const over = await allocate(reward.body.id, { supply: 2 });
      expect(over.status).toBe(400);
      expect(over.body.code).toBe('BAD_REQUEST');
      expect(over.body.issues[0].message).toMatch(/exceeds the codes left for allocations: 1 of 3/);
      expect(await t.eventCount()).toBe(before);
      expect((await allocate(reward.body.id, { supply: 1 })).status).toBe(201);
      expect((await allocate(reward.body.id, { supply: 1 })).status).toBe(400);
    });

    it('concurrent allocations never allocate more than the codes', async () => {
      const reward = await create(asset);
      const responses = await Promise.all(Array.from({ length: 8 }, () => allocate(reward.body.id, { supply: 1 })));
      const created = responses.filter((r) => r.status === 201);
      expect(created).toHaveLength(3);
      // Every loser lost its append to one of the 3 winners, so none runs out of retries: the rest are all 400.
      expect(responses.filter((r) => r.status !== 201).map((r) => r.status)).toEqual(Array(5).fill(400));
      const last = created.map(position).sort().at(-1)!;
      const list = await t.request('GET', `/api/v2/admin/rewards/${reward.body.id}/allocations`, asAcme({ 'x-min-position': last }));
      expect(list.body.totalCount).toBe(3);
      const added = (await t.service.store.readStream(`reward-${reward.body.id}`)).filter((event) => event.type === 'RewardAllocationAdded');
      expect(added.map((event) => (event.data as { firstCodeIndex: number }).firstCodeIndex)).toEqual([0, 1, 2]);
    });

    it('an asset reward without codes takes any supply', async () => {
      const reward = await create({ ...asset, codes: undefined });
      expect((await allocate(reward.body.id, { supply: 1_000_000 })).status).toBe(201);
    });

    const invalid: [string, unknown, string][] = [
      ['supply missing', { amountToDistribute: 1 }, 'supply'],
      ['supply negative', { supply: -1 }, 'supply'],
      ['supply fractional', { supply: 1.5 }, 'supply'],
      ['supply a string', { supply: '10' }, 'supply'],
      ['amountToDistribute 0', { supply: 10, amountToDistribute: 0 }, 'amountToDistribute'],
      ['amountToDistribute fractional', { supply: 10, amountToDistribute: 0.5 }, 'amountToDistribute'],
      ['an unknown field', { supply: 10, rewardId: 'a'.repeat(24) }, ''],
      ['a body that is not an object', [10], ''],
    ];

    it.each(invalid)('%s → 400 with issues, and no event appended', async (_case, body, path) => {
      const reward = await create(entries);
      const before = await settledEventCount();
      const response = await allocate(reward.body.id, body);
      expect(response.status).toBe(400);
      expect(response.body.code).toBe('BAD_REQUEST');
      expect(response.body.issues.map((issue: { path: unknown[] }) => issue.path.join('.'))).toContain(path);
      expect(await t.eventCount()).toBe(before);
    });

    it('an unknown reward, an id that cannot be one, or another organisation’s → 404, nothing appended', async () => {
      const reward = await create(entries);
      await allocate(reward.body.id, { supply: 5 });
      const before = await settledEventCount();
      for (const [id, org] of [
        ['f'.repeat(24), acme],
        ['nope', acme],
        [reward.body.id, beta],
      ] as const) {
        const posted = await allocate(id, { supply: 1 }, org);
        expect(posted.status, id).toBe(404);
        expect(posted.body.code).toBe('NOT_FOUND');
        const listed = await t.request('GET', `/api/v2/admin/rewards/${id}/allocations`, as(org, { 'x-min-position': position(reward) }));
        expect(listed.status, id).toBe(404);
        expect(listed.body.code).toBe('NOT_FOUND');
      }
      expect(await t.eventCount()).toBe(before);
    });

    it('a giveaway whose draw is due or done takes no more entries → 409', async () => {
      const rewardId = await seedPastGiveaway();
      const before = await settledEventCount();
      const response = await allocate(rewardId, { supply: 10 });
      expect(response.status).toBe(409);
      expect(response.body.code).toBe('CONFLICT');
      expect(await t.eventCount()).toBe(before);
    });
  });

  it('describes the reward endpoints in the admin OpenAPI document', async () => {
    const document = (await t.request('GET', '/api/v2/admin/openapi.json', { host: acme.domain })).body;
    expect(Object.keys(document.paths['/rewards']).sort()).toEqual(['get', 'post']);
    expect(Object.keys(document.paths['/rewards/{rewardId}']).sort()).toEqual(['get', 'patch']);
    expect(Object.keys(document.paths['/rewards/{rewardId}/allocations']).sort()).toEqual(['get', 'post']);
    expect(document.paths['/rewards'].post.responses['201'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Reward' });
    expect(document.paths['/rewards'].get.parameters.map((p: { name: string }) => p.name)).toEqual(['limit', 'skip', 'kind', 'communityId', 'x-min-position']);
    expect(document.components.schemas.CreateReward).toBeDefined();
    expect(document.components.schemas.UpdateReward).toBeDefined();
    expect(document.components.schemas.Allocation).toBeDefined();
  });

  /** A giveaway created (as the log records it) with a draw date already past, as if time had moved on. */
  async function seedPastGiveaway(): Promise<string> {
    const rewardId = newId();
    const appended = await t.service.store.append(
      `reward-${rewardId}`,
      [
        {
          type: 'RewardCreated',
          data: {
            ...entries,
            details: [{ language: 'en', title: 'Past draw', description: '', light: noImages, dark: noImages }],
            additionalCommunityIds: [],
            drawsAt: '2020-01-01T00:00:00.000Z',
            rewardId,
            organisationId: acme.organisationId,
            createdAt: '2019-12-01T00:00:00.000Z',
            createdBy: 'seed',
          },
          metadata: { organisationId: acme.organisationId, actor: 'seed', causationId: 'seed', correlationId: 'seed', occurredAt: '2019-12-01T00:00:00.000Z' },
        },
      ],
      { expectedRevision: 'no_stream' },
    );
    remember(appended.position);
    return rewardId;
  }
});
