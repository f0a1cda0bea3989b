import { Migrator } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AllocationDistributedEvent, GiveawayDrawnEvent, RewardAssetGrant } from '../domain/engagement-events.ts';
import type { NewEvent, StreamAppend } from '../infra/event-store/port.ts';
import { idFrom } from '../infra/ids.ts';
import { assetIdOf } from '../process-managers/engagement-engine/index.ts';
import type { BatchContext } from '../projectors/runtime/consumer.ts';
import { rewardAssetsProjection } from '../projectors/reward-assets.ts';
import { rewardEntriesProjection, rewardEntryId } from '../projectors/reward-entries.ts';
import { asTenant, startTestService, type Tenant, type TestService } from './support/service.ts';

/**
 * Reward entries and reward assets as the signed-in user sees and uses them. The engine's hand-outs are set
 * up by appending the events it would append (hand-outs on the allocation's stream, one grant stream per
 * asset, the draw on the reward's stream) to the real store; the draw's winner gets their asset from the
 * engine itself, as it reacts to `GiveawayDrawn`.
 */
const images = { primaryImageUrl: 'https://cdn.example.com/a.png', secondaryImageUrl: '' };
const block = (title: string) => ({ title, description: `${title}!`, light: images, dark: images });
const emailVar = '1'.repeat(24);
const phoneVar = '2'.repeat(24);
const newsVar = '3'.repeat(24);
const otherCommunity = 'e'.repeat(24);

const REWARD_ASSET_FIELDS = [
  'id',
  'organisationId',
  'communityId',
  'rewardId',
  'allocationId',
  'userId',
  'eventSourceId',
  'details',
  'tags',
  'campaigns',
  'additionalCommunityIds',
  'metadata',
  'createdAt',
  'updatedAt',
  'claimedAt',
  'redeemedAt',
  'expiresAt',
  'redeemable',
].sort();
const REWARD_ENTRY_FIELDS = [
  'id',
  'organisationId',
  'communityId',
  'rewardId',
  'userId',
  'details',
  'totalEntries',
  'entries',
  'tags',
  'campaigns',
  'additionalCommunityIds',
  'rewardAssetIds',
  'createdAt',
  'updatedAt',
  'checkByDate',
  'checkedAt',
  'drawnAt',
  'rewardAssets',
].sort();
const REDEEMABLE_FIELDS = [
  'additionalInformation',
  'content',
  'instructions',
  'instructionsImageUrl',
  'supportUrl',
  'supportEmail',
  'supportPhoneNumber',
  'redeemByDate',
].sort();
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const HEX = /^[0-9a-f]{24}$/;

function expectDetailsBlock(details: any) {
  expect(Object.keys(details).sort()).toEqual(['dark', 'description', 'light', 'title']);
  for (const theme of [details.light, details.dark]) {
    expect(typeof theme.primaryImageUrl).toBe('string');
    expect(typeof theme.secondaryImageUrl).toBe('string');
  }
  expect(typeof details.title).toBe('string');
  expect(typeof details.description).toBe('string');
}

function expectRewardAsset(asset: any) {
  expect(Object.keys(asset).sort()).toEqual(REWARD_ASSET_FIELDS);
  for (const field of ['id', 'organisationId', 'communityId', 'rewardId', 'userId']) expect(asset[field], field).toMatch(HEX);
  expect(asset.allocationId === null || HEX.test(asset.allocationId)).toBe(true);
  expect(typeof asset.eventSourceId).toBe('string');
  expectDetailsBlock(asset.details);
  for (const field of ['tags', 'campaigns', 'additionalCommunityIds']) {
    expect(Array.isArray(asset[field]), field).toBe(true);
    for (const item of asset[field]) expect(typeof item).toBe('string');
  }
  expect(typeof asset.metadata).toBe('object');
  expect(asset.metadata).not.toBeNull();
  expect(asset.createdAt).toMatch(ISO);
  expect(asset.updatedAt).toMatch(ISO);
  for (const field of ['claimedAt', 'redeemedAt', 'expiresAt']) expect(asset[field] === null || ISO.test(asset[field]), field).toBe(true);
  expect(Object.keys(asset.redeemable).sort()).toEqual(REDEEMABLE_FIELDS);
  for (const item of asset.redeemable.additionalInformation) {
    expect(Object.keys(item).sort()).toEqual(['position', 'required', 'variableConfigId']);
    expect(typeof item.variableConfigId).toBe('string');
    expect(typeof item.required).toBe('boolean');
    expect(typeof item.position).toBe('number');
  }
  for (const field of REDEEMABLE_FIELDS.filter((f) => f !== 'additionalInformation')) {
    expect(asset.redeemable[field] === null || typeof asset.redeemable[field] === 'string', field).toBe(true);
  }
}

function expectRewardEntry(entry: any) {
  expect(Object.keys(entry).sort()).toEqual(REWARD_ENTRY_FIELDS);
  for (const field of ['id', 'organisationId', 'communityId', 'rewardId', 'userId']) expect(entry[field], field).toMatch(HEX);
  expectDetailsBlock(entry.details);
  expect(Number.isInteger(entry.totalEntries)).toBe(true);
  for (const item of entry.entries) {
    expect(Object.keys(item).sort()).toEqual(['allocationId', 'amount', 'createdAt']);
    expect(item.allocationId).toMatch(HEX);
    expect(typeof item.amount).toBe('number');
    expect(item.createdAt).toMatch(ISO);
  }
  for (const field of ['tags', 'campaigns', 'additionalCommunityIds', 'rewardAssetIds']) {
    expect(Array.isArray(entry[field]), field).toBe(true);
    for (const item of entry[field]) expect(typeof item).toBe('string');
  }
  expect(entry.createdAt).toMatch(ISO);
  expect(entry.updatedAt).toMatch(ISO);
  for (const field of ['checkByDate', 'checkedAt', 'drawnAt']) expect(entry[field] === null || ISO.test(entry[field]), field).toBe(true);
  expect(Array.isArray(entry.rewardAssets)).toBe(true);
  for (const asset of entry.rewardAssets) expectRewardAsset(asset);
}

describe('reward entries and reward assets of the signed-in user', () => {
  let t: TestService;
  let acme: Tenant;
  let beta: Tenant;
  let community: string;
  let betaCommunity: string;
  const users = { u1: '', u2: '', b1: '' };
  const tokens = { u1: '', u2: '', b1: '' };
  const rewards = { coffee: '', expired: '', late: '', trip: '', raffle: '', betaTrip: '' };
  const allocations = { coffee: '', expired: '', late: '', tripA: '', tripB: '', raffle: '', betaTrip: '' };
  const assets = { coffee0: '', coffee1: '', coffee2: '', expired: '', late: '', win: '', beta: '' };
  let tripDrawEventId = '';
  let lastPosition = '';

  const admin = async (tenant: Tenant, method: string, path: string, body?: unknown) => {
    const response = await t.request(method, `/api/v2/admin${path}`, { ...asTenant(tenant), body });
    expect([200, 201], `${method} ${path}: ${JSON.stringify(response.body)}`).toContain(response.status);
    return response.body;
  };
  const asUser = (user: keyof typeof users, extra: Record<string, string> = {}) =>
    asTenant(user === 'b1' ? beta : acme, { authorization: `Bearer ${tokens[user]}`, ...extra });
  const entriesOf = (user: keyof typeof users, query = '', extra: Record<string, string> = {}) =>
    t.request('GET', `/api/v2/integration/me/reward-entries${query}`, asUser(user, extra));
  const assetsOf = (user: keyof typeof users, query = '', extra: Record<string, string> = {}) =>
    t.request('GET', `/api/v2/integration/me/reward-assets${query}`, asUser(user, extra));
  const claim = (user: keyof typeof users, assetId: string, extra: Record<string, string> = {}) =>
    t.request('POST', `/api/v2/integration/me/reward-assets/${assetId}/claim`, asUser(user, extra));
  const redeem = (user: keyof typeof users, assetId: string, body?: unknown, extra: Record<string, string> = {}) =>
    t.request('POST', `/api/v2/integration/me/reward-assets/${assetId}/redeem`, { ...asUser(user, extra), body });
  const remember = (response: { headers: Record<string, unknown> }) => {
    const position = response.headers['x-event-position'] as string | undefined;
    if (position && position > lastPosition) lastPosition = position;
  };

  /** What the engine appends for a hand-out: the fact on the allocation's stream and, for assets, one grant stream per unit. */
  const handOut = async (
    tenant: Tenant,
    allocationId: string,
    rewardId: string,
    userId: string,
    rewardKind: 'entries' | 'asset',
    amount: number,
    firstUnit: number,
    occurredAt: string,
    codes: string[] | null = null,
  ) => {
    const who = { organisationId: tenant.organisationId, communityId: tenant === acme ? community : betaCommunity, userId, occurredAt };
    const metadata = { organisationId: tenant.organisationId, actor: 'engine', occurredAt };
    const fact: AllocationDistributedEvent = {
      type: 'AllocationDistributed',
      data: { ...who, allocationId, rewardId, rewardKind, amount, firstUnit, source: { kind: 'giveaway', rewardId } },
    };
    const appends: StreamAppend[] = [{ stream: `allocation-${allocationId}`, expectedRevision: 'any', events: [{ ...fact, metadata }] }];
    if (rewardKind === 'asset') {
      const reward = await admin(tenant, 'GET', `/rewards/${rewardId}`);
      for (let unit = firstUnit; unit < firstUnit + amount; unit++) {
        const grant: RewardAssetGrant = {
          ...who,
          assetId: assetIdOf(allocationId, unit),
          rewardId,
          allocationId,
          eventSourceId: idFrom(`custom-event:${allocationId}:${unit}`),
          details: reward.details,
          tags: reward.tags,
          campaigns: reward.campaigns,
          additionalCommunityIds: reward.additionalCommunityIds,
          metadata: reward.metadata,
          redeemable: reward.redeemable,
          code: codes?.[unit] ?? null,
          expiresAt: reward.expiresAt,
        };
        const granted: NewEvent = { type: 'RewardAssetGranted', data: grant, metadata };
        appends.push({ stream: `rewardasset-${grant.assetId}`, expectedRevision: 'no_stream', events: [granted] });
      }
    }
    await t.service.store.appendMultiple(appends);
  };

  beforeAll(async () => {
    t = await startTestService();
    acme = await t.createOrganisation('acme');
    beta = await t.createOrganisation('beta');
    community = (await admin(acme, 'POST', '/communities', { name: 'Coffee club' })).id;
    betaCommunity = (await admin(beta, 'POST', '/communities', { name: 'Beta club' })).id;
    for (const user of ['u1', 'u2', 'b1'] as const) {
      const tenant = user === 'b1' ? beta : acme;
      users[user] = (await admin(tenant, 'POST', '/users', { externalUserId: `ext-${user}`, communityIds: [user === 'b1' ? betaCommunity : community] })).id;
      tokens[user] = (await admin(tenant, 'POST', `/users/${users[user]}/tokens`, {})).token;
    }

    const common = {
      communityId: community,
      tags: ['coffee'],
      campaigns: ['spring'],
      additionalCommunityIds: [otherCommunity],
      metadata: { sponsor: 'Bean Co' },
    };
    rewards.coffee = (
      await admin(acme, 'POST', '/rewards', {
        kind: 'asset',
        ...common,
        // Portuguese first: the reward's first language is the last fallback, whatever order JSONB keeps.
        details: { 'pt-PT': block('Café grátis'), en: block('Free coffee'), fr: block('Café offert') },
        redeemable: {
          additionalInformation: [
            { variableConfigId: phoneVar, required: true, position: 1 },
            { variableConfigId: emailVar, required: true, position: 0 },
            { variableConfigId: newsVar, required: false, position: 2 },
          ],
          content: 'Show this at the counter',
          instructions: 'Ask the barista',
          instructionsImageUrl: 'https://cdn.example.com/how.png',
          supportUrl: 'https://help.example.com',
          supportEmail: 'help@example.com',
          supportPhoneNumber: '+33 1 00 00 00 00',
          redeemByDate: '2099-12-31T00:00:00Z',
        },
        codes: ['C-1', 'C-2', 'C-3'],
        expiresAt: '2099-06-30T00:00:00Z',
      })
    ).id;
    rewards.expired = (
      await admin(acme, 'POST', '/rewards', { kind: 'asset', ...common, details: { en: block('Old mug') }, expiresAt: '2020-01-01T00:00:00Z' })
    ).id;
    rewards.late = (
      await admin(acme, 'POST', '/rewards', {
        kind: 'asset',
        ...common,
        details: { en: block('Late tea') },
        redeemable: { redeemByDate: '2020-01-01T00:00:00Z' },
      })
    ).id;
    rewards.trip = (
      await admin(acme, 'POST', '/rewards', {
        kind: 'entries',
        ...common,
        tags: ['travel'],
        details: { en: block('Trip'), fr: block('Voyage') },
        drawsAt: '2099-04-01T12:00:00+02:00',
        supply: 1,
      })
    ).id;
    rewards.raffle = (
      await admin(acme, 'POST', '/rewards', { kind: 'entries', ...common, details: { en: block('Raffle') }, drawsAt: '2099-05-01T00:00:00Z', supply: 2 })
    ).id;
    rewards.betaTrip = (
      await admin(beta, 'POST', '/rewards', {
        kind: 'entries',
        communityId: betaCommunity,
        details: { en: block('Beta trip') },
        drawsAt: '2099-04-01T00:00:00Z',
        supply: 1,
      })
    ).id;
    const allocate = async (tenant: Tenant, rewardId: string, supply: number) =>
      (await admin(tenant, 'POST', `/rewards/${rewardId}/allocations`, { supply })).id as string;
    allocations.coffee = await allocate(acme, rewards.coffee, 3);
    allocations.expired = await allocate(acme, rewards.expired, 1);
    allocations.late = await allocate(acme, rewards.late, 1);
    allocations.tripA = await allocate(acme, rewards.trip, 100);
    allocations.tripB = await allocate(acme, rewards.trip, 100);
    allocations.raffle = await allocate(acme, rewards.raffle, 100);
    allocations.betaTrip = await allocate(beta, rewards.betaTrip, 100);

    // The hand-outs read the rewards back from the read model: wait until it has them.
    await t.settle();
    // Entries: u1 into the trip twice (2 + 3) and the raffle once, u2 into the trip once; b1 into beta's trip.
    await handOut(acme, allocations.tripA, rewards.trip, users.u1, 'entries', 2, 0, '2026-01-05T09:00:00.000Z');
    await handOut(acme, allocations.tripB, rewards.trip, users.u1, 'entries', 3, 0, '2026-01-06T09:00:00.000Z');
    await handOut(acme, allocations.tripA, rewards.trip, users.u2, 'entries', 1, 2, '2026-01-07T09:00:00.000Z');
    await handOut(acme, allocations.raffle, rewards.raffle, users.u1, 'entries', 1, 0, '2026-01-08T09:00:00.000Z');
    await handOut(beta, allocations.betaTrip, rewards.betaTrip, users.b1, 'entries', 4, 0, '2026-01-08T09:00:00.000Z');
    // Assets: u1 gets coffee units 0 and 1 (codes C-1, C-2), u2 unit 2; u1 an expired one and a late one.
    await handOut(acme, allocations.coffee, rewards.coffee, users.u1, 'asset', 2, 0, '2026-01-10T09:00:00.000Z', ['C-1', 'C-2', 'C-3']);
    await handOut(acme, allocations.coffee, rewards.coffee, users.u2, 'asset', 1, 2, '2026-01-11T09:00:00.000Z', ['C-1', 'C-2', 'C-3']);
    await handOut(acme, allocations.expired, rewards.expired, users.u1, 'asset', 1, 0, '2026-01-12T09:00:00.000Z');
    await handOut(acme, allocations.late, rewards.late, users.u1, 'asset', 1, 0, '2026-01-13T09:00:00.000Z');
    assets.coffee0 = assetIdOf(allocations.coffee, 0);
    assets.coffee1 = assetIdOf(allocations.coffee, 1);
    assets.coffee2 = assetIdOf(allocations.coffee, 2);
    assets.expired = assetIdOf(allocations.expired, 0);
    assets.late = assetIdOf(allocations.late, 0);

    // The trip is drawn: u1 wins; the engine grants the winner's asset from the draw.
    assets.win = idFrom(`test-win:${rewards.trip}`);
    const drawn: GiveawayDrawnEvent = {
      type: 'GiveawayDrawn',
      data: {
        rewardId: rewards.trip,
        organisationId: acme.organisationId,
        communityId: community,
        drawnAt: '2099-04-01T10:01:00.000Z',
        seed: 'test-seed',
        entrants: [
          { userId: users.u1, entries: 5 },
          { userId: users.u2, entries: 1 },
        ],
        winners: [{ userId: users.u1, assetId: assets.win }],
      },
    };
    await t.service.store.append(`reward-${rewards.trip}`, [{ ...drawn, metadata: { organisationId: acme.organisationId, actor: 'draw-job' } }]);
    tripDrawEventId = (await t.service.store.readStream(`reward-${rewards.trip}`)).find((event) => event.type === 'GiveawayDrawn')!.id;
    await t.settle();
  });
  afterAll(async () => {
    await t?.close();
  });

  describe('GET /me/reward-entries', () => {
    it("lists the user's entries newest first, each the contract's reward entry with every field typed", async () => {
      const response = await entriesOf('u1');
      expect(response.status).toBe(200);
      expect(Object.keys(response.body).sort()).toEqual(['edges', 'totalCount']);
      expect(response.body.totalCount).toBe(2);
      const [raffle, trip] = response.body.edges;
      for (const entry of response.body.edges) expectRewardEntry(entry);
      expect(raffle.rewardId).toBe(rewards.raffle);
      expect(trip).toEqual({
        id: rewardEntryId(rewards.trip, users.u1),
        organisationId: acme.organisationId,
        communityId: community,
        rewardId: rewards.trip,
        userId: users.u1,
        details: block('Trip'),
        totalEntries: 5,
        entries: [
          { allocationId: allocations.tripA, amount: 2, createdAt: '2026-01-05T09:00:00.000Z' },
          { allocationId: allocations.tripB, amount: 3, createdAt: '2026-01-06T09:00:00.000Z' },
        ],
        tags: ['travel'],
        campaigns: ['spring'],
        additionalCommunityIds: [otherCommunity],
        rewardAssetIds: [assets.win],
        createdAt: '2026-01-05T09:00:00.000Z',
        updatedAt: '2099-04-01T10:01:00.000Z',
        checkByDate: '2099-04-01T10:00:00.000Z',
        checkedAt: '2099-04-01T10:01:00.000Z',
        drawnAt: '2099-04-01T10:01:00.000Z',
        rewardAssets: [
          {
            id: assets.win,
            organisationId: acme.organisationId,
            communityId: community,
            rewardId: rewards.trip,
            allocationId: null,
            userId: users.u1,
            eventSourceId: tripDrawEventId,
            details: block('Trip'),
            tags: ['travel'],
            campaigns: ['spring'],
            additionalCommunityIds: [otherCommunity],
            metadata: { sponsor: 'Bean Co' },
            createdAt: '2099-04-01T10:01:00.000Z',
            updatedAt: '2099-04-01T10:01:00.000Z',
            claimedAt: null,
            redeemedAt: null,
            expiresAt: null,
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
          },
        ],
      });
      expect(raffle).toMatchObject({
        totalEntries: 1,
        checkByDate: '2099-05-01T00:00:00.000Z',
        checkedAt: null,
        drawnAt: null,
        rewardAssetIds: [],
        rewardAssets: [],
        details: block('Raffle'),
      });
    });

    it("never shows another user's entries: u2 sees their own entry in the drawn trip, without u1's win", async () => {
      const response = await entriesOf('u2');
      expect(response.status).toBe(200);
      expect(response.body.totalCount).toBe(1);
      const [trip] = response.body.edges;
      expectRewardEntry(trip);
      expect(trip).toMatchObject({
        id: rewardEntryId(rewards.trip, users.u2),
        userId: users.u2,
        totalEntries: 1,
        entries: [{ allocationId: allocations.tripA, amount: 1, createdAt: '2026-01-07T09:00:00.000Z' }],
        rewardAssetIds: [],
        rewardAssets: [],
        drawnAt: '2099-04-01T10:01:00.000Z',
        checkedAt: '2099-04-01T10:01:00.000Z',
      });
    });

    it("never shows another organisation's entries", async () => {
      const response = await entriesOf('b1');
      expect(response.status).toBe(200);
      expect(response.body.totalCount).toBe(1);
      expect(response.body.edges[0]).toMatchObject({ organisationId: beta.organisationId, rewardId: rewards.betaTrip, userId: users.b1, totalEntries: 4 });
    });

    it('pages with limit (1..100, default 10) and skip (>= 0); out of range → 400', async () => {
      const second = await entriesOf('u1', '?limit=1&skip=1');
      expect(second.status).toBe(200);
      expect(second.body.totalCount).toBe(2);
      expect(second.body.edges.map((entry: { rewardId: string }) => entry.rewardId)).toEqual([rewards.trip]);
      expect((await entriesOf('u1', '?skip=2')).body).toEqual({ totalCount: 2, edges: [] });
      expect((await entriesOf('u1', '?limit=100')).status).toBe(200);
      for (const query of ['?limit=0', '?limit=101', '?skip=-1', '?limit=abc', '?limit=1.5']) {
        const response = await entriesOf('u1', query);
        expect(response.status, query).toBe(400);
        expect(response.body.code, query).toBe('BAD_REQUEST');
        expect(Array.isArray(response.body.issues), query).toBe(true);
      }
    });
  });

  describe('GET /me/reward-assets', () => {
    it("lists the user's assets newest first: every contract field typed, each unit's code as its content", async () => {
      const response = await assetsOf('u1');
      expect(response.status).toBe(200);
      expect(response.body.totalCount).toBe(5);
      for (const asset of response.body.edges) expectRewardAsset(asset);
      const ids = response.body.edges.map((asset: { id: string }) => asset.id);
      expect(ids.slice(0, 3)).toEqual([assets.win, assets.late, assets.expired]);
      expect(ids.slice(3).sort()).toEqual([assets.coffee0, assets.coffee1].sort());
      expect(ids.slice(3)).toEqual([...ids.slice(3)].sort().reverse());
      const coffee0 = response.body.edges.find((asset: { id: string }) => asset.id === assets.coffee0);
      expect(coffee0).toEqual({
        id: assets.coffee0,
        organisationId: acme.organisationId,
        communityId: community,
        rewardId: rewards.coffee,
        allocationId: allocations.coffee,
        userId: users.u1,
        eventSourceId: idFrom(`custom-event:${allocations.coffee}:0`),
        details: block('Free coffee'),
        tags: ['coffee'],
        campaigns: ['spring'],
        additionalCommunityIds: [otherCommunity],
        metadata: { sponsor: 'Bean Co' },
        createdAt: '2026-01-10T09:00:00.000Z',
        updatedAt: '2026-01-10T09:00:00.000Z',
        claimedAt: null,
        redeemedAt: null,
        expiresAt: '2099-06-30T00:00:00.000Z',
        redeemable: {
          additionalInformation: [
            { variableConfigId: phoneVar, required: true, position: 1 },
            { variableConfigId: emailVar, required: true, position: 0 },
            { variableConfigId: newsVar, required: false, position: 2 },
          ],
          content: 'C-1',
          instructions: 'Ask the barista',
          instructionsImageUrl: 'https://cdn.example.com/how.png',
          supportUrl: 'https://help.example.com',
          supportEmail: 'help@example.com',
          supportPhoneNumber: '+33 1 00 00 00 00',
          redeemByDate: '2099-12-31T00:00:00.000Z',
        },
      });
      expect(response.body.edges.find((asset: { id: string }) => asset.id === assets.coffee1).redeemable.content).toBe('C-2');
      // Without codes, the content is the reward's own.
      expect(response.body.edges.find((asset: { id: string }) => asset.id === assets.late).redeemable.content).toBeNull();
    });

    it("never shows another user's or organisation's assets", async () => {
      const u2 = await assetsOf('u2');
      expect(u2.body.totalCount).toBe(1);
      expect(u2.body.edges[0]).toMatchObject({ id: assets.coffee2, userId: users.u2, redeemable: { content: 'C-3' } });
      const b1 = await assetsOf('b1');
      expect(b1.status).toBe(200);
      expect(b1.body).toEqual({ totalCount: 0, edges: [] });
    });

    it('pages with limit and skip; out of range → 400', async () => {
      const all = (await assetsOf('u1', '?limit=100')).body.edges.map((asset: { id: string }) => asset.id);
      const page = await assetsOf('u1', '?limit=2&skip=2');
      expect(page.body.totalCount).toBe(5);
      expect(page.body.edges.map((asset: { id: string }) => asset.id)).toEqual(all.slice(2, 4));
      for (const query of ['?limit=0', '?limit=101', '?skip=-1']) {
        const response = await assetsOf('u1', query);
        expect(response.status, query).toBe(400);
        expect(response.body.code, query).toBe('BAD_REQUEST');
      }
    });
  });

  describe('x-language', () => {
    it("picks the language, then its primary subtag, then the organisation's default; a malformed tag → 400", async () => {
      const titleOf = async (language: string | null) => {
        const extra: Record<string, string> = language === null ? {} : { 'x-language': language };
        const entries = await entriesOf('u1', '', extra);
        const asset = (await assetsOf('u1', '', extra)).body.edges.find((edge: { id: string }) => edge.id === assets.coffee0);
        const trip = entries.body.edges.find((edge: { rewardId: string }) => edge.rewardId === rewards.trip);
        return { trip: trip.details.title, won: trip.rewardAssets[0].details.title, coffee: asset.details.title };
      };
      expect(await titleOf('fr')).toEqual({ trip: 'Voyage', won: 'Voyage', coffee: 'Café offert' });
      expect(await titleOf('FR-ca')).toEqual({ trip: 'Voyage', won: 'Voyage', coffee: 'Café offert' });
      expect(await titleOf('pt-PT')).toEqual({ trip: 'Trip', won: 'Trip', coffee: 'Café grátis' });
      expect(await titleOf('de')).toEqual({ trip: 'Trip', won: 'Trip', coffee: 'Free coffee' });
      expect(await titleOf(null)).toEqual({ trip: 'Trip', won: 'Trip', coffee: 'Free coffee' });
      for (const bad of ['not a tag', 'e']) {
        expect((await entriesOf('u1', '', { 'x-language': bad })).status, bad).toBe(400);
        expect((await assetsOf('u1', '', { 'x-language': bad })).status, bad).toBe(400);
      }
    });
  });

  describe('POST /me/reward-assets/{assetId}/claim', () => {
    it('claims: 200 with the asset as claimed, and the position it wrote', async () => {
      const before = Date.now();
      const response = await claim('u1', assets.coffee0, { 'x-language': 'fr' });
      expect(response.status).toBe(200);
      expectRewardAsset(response.body);
      expect(response.body).toMatchObject({
        id: assets.coffee0,
        userId: users.u1,
        redeemedAt: null,
        details: block('Café offert'),
        redeemable: { content: 'C-1' },
      });
      expect(Date.parse(response.body.claimedAt)).toBeGreaterThanOrEqual(before - 1000);
      expect(response.body.updatedAt).toBe(response.body.claimedAt);
      expect(response.headers['x-event-position']).toBeTruthy();
      remember(response);
      const listed = await assetsOf('u1', '?limit=100', { 'x-min-position': response.headers['x-event-position'] as string });
      expect(listed.body.edges.find((asset: { id: string }) => asset.id === assets.coffee0).claimedAt).toBe(response.body.claimedAt);
    });

    it('claiming again changes nothing and answers the same asset', async () => {
      await t.settle();
      const first = (await assetsOf('u1', '?limit=100')).body.edges.find((asset: { id: string }) => asset.id === assets.coffee0);
      const count = await t.eventCount();
      const again = await claim('u1', assets.coffee0);
      expect(again.status).toBe(200);
      expect(again.body.claimedAt).toBe(first.claimedAt);
      expect(again.body).toEqual(first);
      expect(await t.eventCount()).toBe(count);
    });

    it("another user's, another organisation's, an unknown or a malformed id → 404", async () => {
      for (const [user, assetId] of [
        ['u2', assets.coffee0],
        ['u2', assets.coffee1],
        ['b1', assets.coffee1],
        ['u1', 'f'.repeat(24)],
        ['u1', 'not-an-id'],
      ] as const) {
        const response = await claim(user, assetId);
        expect(response.status, `${user} ${assetId}`).toBe(404);
        expect(response.body.code).toBe('NOT_FOUND');
      }
    });

    it('an expired asset → 409 saying so', async () => {
      const response = await claim('u1', assets.expired);
      expect(response.status).toBe(409);
      expect(response.body.code).toBe('CONFLICT');
      expect(response.body.message).toMatch(/expired at 2020-01-01T00:00:00.000Z/);
    });
  });

  describe('POST /me/reward-assets/{assetId}/redeem', () => {
    const information = [
      { variableConfigId: emailVar, value: 'me@example.com' },
      { variableConfigId: phoneVar.toUpperCase(), value: '+33 6 00 00 00 00' },
    ];

    it('before the claim → 409', async () => {
      const response = await redeem('u1', assets.coffee1, { information });
      expect(response.status).toBe(409);
      expect(response.body.message).toMatch(/must be claimed/);
    });

    it('a required item missing or blank → 400 naming its variableConfigId; unknown items and bad bodies → 400', async () => {
      const missing = await redeem('u1', assets.coffee0, { information: [{ variableConfigId: emailVar, value: 'me@example.com' }] });
      expect(missing.status).toBe(400);
      expect(missing.body.code).toBe('BAD_REQUEST');
      expect(JSON.stringify(missing.body)).toContain(phoneVar);
      const none = await redeem('u1', assets.coffee0);
      expect(none.status).toBe(400);
      expect(JSON.stringify(none.body)).toContain(emailVar);
      const blank = await redeem('u1', assets.coffee0, { information: [information[0], { variableConfigId: phoneVar, value: ' ' }] });
      expect(blank.status).toBe(400);
      for (const body of [
        { information: [...information, { variableConfigId: '4'.repeat(24), value: 'x' }] },
        { information: [...information, { variableConfigId: emailVar, value: 'again@example.com' }] },
        { information: [{ variableConfigId: emailVar, value: 42 }] },
        { information: [{ variableConfigId: 'nope', value: 'x' }] },
        { information, extra: true },
      ]) {
        const response = await redeem('u1', assets.coffee0, body);
        expect(response.status, JSON.stringify(body)).toBe(400);
        expect(response.body.code).toBe('BAD_REQUEST');
      }
    });

    it("another user's asset → 404", async () => {
      expect((await redeem('u2', assets.coffee0, { information })).status).toBe(404);
    });

    it('redeems a claimed asset with its information: 200, then a second time → 409', async () => {
      const response = await redeem('u1', assets.coffee0, { information: [...information, { variableConfigId: newsVar, value: 'no' }] });
      expect(response.status).toBe(200);
      expectRewardAsset(response.body);
      expect(response.body.redeemedAt).toMatch(ISO);
      expect(response.body.updatedAt).toBe(response.body.redeemedAt);
      expect(response.body.claimedAt).toMatch(ISO);
      expect(response.body.details).toEqual(block('Free coffee'));
      remember(response);
      const again = await redeem('u1', assets.coffee0, { information });
      expect(again.status).toBe(409);
      expect(again.body.message).toMatch(/already redeemed/);
      const listed = await assetsOf('u1', '?limit=100', { 'x-min-position': lastPosition });
      expect(listed.body.edges.find((asset: { id: string }) => asset.id === assets.coffee0).redeemedAt).toBe(response.body.redeemedAt);
    });

    it('after redeemByDate → 409 (it can still be claimed)', async () => {
      expect((await claim('u1', assets.late)).status).toBe(200);
      const response = await redeem('u1', assets.late);
      expect(response.status).toBe(409);
      expect(response.body.message).toMatch(/redeemed by 2020-01-01T00:00:00.000Z/);
    });

    it('an asset that asks for nothing (a giveaway win) is redeemed without a body', async () => {
      expect((await claim('u1', assets.win)).status).toBe(200);
      const response = await redeem('u1', assets.win);
      expect(response.status).toBe(200);
      expect(response.body).toMatchObject({ id: assets.win, allocationId: null, rewardId: rewards.trip });
      expect(response.body.redeemedAt).toMatch(ISO);
      remember(response);
      const entries = await entriesOf('u1', '', { 'x-min-position': lastPosition });
      const trip = entries.body.edges.find((entry: { rewardId: string }) => entry.rewardId === rewards.trip);
      expect(trip.rewardAssets[0].redeemedAt).toBe(response.body.redeemedAt);
    });
  });

  describe('authentication', () => {
    it('every route → 401 without a user token, with another organisation’s, or without an API token', async () => {
      const routes = [
        ['GET', '/api/v2/integration/me/reward-entries'],
        ['GET', '/api/v2/integration/me/reward-assets'],
        ['POST', `/api/v2/integration/me/reward-assets/${assets.coffee1}/claim`],
        ['POST', `/api/v2/integration/me/reward-assets/${assets.coffee1}/redeem`],
      ] as const;
      for (const [method, path] of routes) {
        const noUser = await t.request(method, path, asTenant(acme));
        expect(noUser.status, `${method} ${path}`).toBe(401);
        expect(noUser.body.code).toBe('UNAUTHORIZED');
        const foreign = await t.request(method, path, asTenant(acme, { authorization: `Bearer ${tokens.b1}` }));
        expect(foreign.status, `${method} ${path} foreign`).toBe(401);
        const noApiToken = await t.request(method, path, { host: acme.domain, headers: { authorization: `Bearer ${tokens.u1}` } });
        expect(noApiToken.status, `${method} ${path} no API token`).toBe(401);
      }
      // Nothing was claimed by the refused requests.
      const listed = await assetsOf('u1', '?limit=100');
      expect(listed.body.edges.find((asset: { id: string }) => asset.id === assets.coffee1).claimedAt).toBeNull();
    });
  });

  it('describes the four routes in the integration OpenAPI document', async () => {
    const response = await t.request('GET', '/api/v2/integration/openapi.json', { host: acme.domain });
    expect(response.status).toBe(200);
    expect(Object.keys(response.body.paths)).toEqual(
      expect.arrayContaining(['/me/reward-entries', '/me/reward-assets', '/me/reward-assets/{assetId}/claim', '/me/reward-assets/{assetId}/redeem']),
    );
    expect(response.body.paths['/me/reward-entries'].get.parameters.map((p: { name: string }) => p.name)).toEqual(
      expect.arrayContaining(['limit', 'skip', 'x-language', 'Authorization']),
    );
    expect(Object.keys(response.body.components.schemas)).toEqual(expect.arrayContaining(['RewardEntry', 'RewardAsset', 'RedeemRewardAsset', 'Redeemable']));
  });

  it("without x-language, falls back to the organisation's default language, then the reward's first language", async () => {
    const changed = await t.request('PATCH', '/api/v2/admin/settings', { ...asTenant(acme), body: { defaultLanguage: 'fr' } });
    expect(changed.status).toBe(200);
    const inFrench = await assetsOf('u1', '?limit=100');
    expect(inFrench.body.edges.find((asset: { id: string }) => asset.id === assets.coffee1).details).toEqual(block('Café offert'));
    expect((await entriesOf('u1')).body.edges[1].details).toEqual(block('Voyage'));
    expect((await t.request('PATCH', '/api/v2/admin/settings', { ...asTenant(acme), body: { defaultLanguage: 'es' } })).status).toBe(200);
    const coffee = (await assetsOf('u1', '?limit=100')).body.edges.find((asset: { id: string }) => asset.id === assets.coffee1);
    expect(coffee.details).toEqual(block('Café grátis'));
    const entries = (await entriesOf('u1')).body.edges;
    expect(entries[1].details).toEqual(block('Trip'));
    expect(entries[1].rewardAssets[0].details).toEqual(block('Trip'));
    // The claim's answer falls back the same way.
    const claimed = await claim('u1', assets.coffee1);
    expect(claimed.status).toBe(200);
    expect(claimed.body.details).toEqual(block('Café grátis'));
  });

  it('a rebuild from the event log alone gives the same rows', async () => {
    await t.settle();
    const db = t.service.database.db;
    for (const projection of [rewardEntriesProjection, rewardAssetsProjection]) {
      const schema = `rebuild_check_${projection.name}`;
      await db.schema.createSchema(schema).execute();
      const scoped = Object.fromEntries(
        Object.entries(projection.migrations).map(([name, migration]) => [name, { up: (migrating: typeof db) => migration.up(migrating.withSchema(schema)) }]),
      );
      const { error } = await new Migrator({ db, provider: { getMigrations: async () => scoped }, migrationTableSchema: schema }).migrateToLatest();
      expect(error).toBeUndefined();
      const context: BatchContext = {
        staging: false,
        append: () => Promise.reject(new Error('a read model appends nothing')),
        schedule: () => Promise.reject(new Error('a read model schedules nothing')),
      };
      for (let after: string | null = null, isEnd = false; !isEnd;) {
        const page = await t.service.store.readAll({ after, limit: 500 });
        const events = page.events.filter((event) => projection.canHandle.has(event.type));
        if (events.length > 0) await projection.apply(db.withSchema(schema), events, context);
        ({ isEnd } = page);
        after = page.checkpoint ?? after;
      }
      for (const table of projection.tables) {
        const live = await db.selectFrom(table).selectAll().orderBy('id').execute();
        const rebuilt = await db.withSchema(schema).selectFrom(table).selectAll().orderBy('id').execute();
        expect(live.length, table).toBeGreaterThan(0);
        expect(rebuilt, table).toEqual(live);
      }
    }
  });
});
