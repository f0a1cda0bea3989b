import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, asTenant, type Tenant } from './support/service.ts';

const none = { primaryImageUrl: '', secondaryImageUrl: '' };
const rewardId = 'd'.repeat(24);
const valid = {
  name: 'Spin to win',
  type: 'spin-the-wheel',
  communityId: 'C'.repeat(24),
  details: { en: { title: 'Spin', description: 'Spin the wheel', light: none, dark: none }, fr: { title: 'Tournez' } },
};
const prizes = {
  distributions: [
    {
      pointsToDistribute: 10,
      bonusXpToDistribute: 0,
      rewardsConfig: { amountToDistribute: 1, allocations: [{ id: 'a'.repeat(24), rewardId, supply: 3, amountToDistribute: 1 }] },
    },
    { pointsToDistribute: 0, bonusXpToDistribute: 5, rewardsConfig: { amountToDistribute: 1, allocations: [{ rewardId, supply: 0 }] } },
  ],
};

describe('game configs over HTTP', () => {
  let t: TestService;
  let acme: Tenant;
  let beta: Tenant;
  const asAcme = (extra: Record<string, string> = {}) => asTenant(acme, extra);
  const asBeta = (extra: Record<string, string> = {}) => asTenant(beta, extra);
  const create = async (body: unknown = valid) => {
    const response = await t.request('POST', '/api/v2/admin/games', { ...asAcme(), body });
    expect(response.status, JSON.stringify(response.body)).toBe(201);
    return { game: response.body, position: response.headers['x-event-position'] as string };
  };

  beforeAll(async () => {
    t = await startTestService();
    acme = await t.createOrganisation('acme');
    beta = await t.createOrganisation('beta');
  });
  afterAll(async () => {
    await t.close();
  });

  it('creates a game config: 201 with every field; GET returns the same', async () => {
    const response = await t.request('POST', '/api/v2/admin/games', { ...asAcme(), body: valid });
    expect(response.status).toBe(201);
    const game = response.body;
    expect(Object.keys(game).sort()).toEqual(
      ['communityId', 'createdAt', 'createdBy', 'details', 'distributions', 'id', 'name', 'organisationId', 'type', 'updatedAt', 'updatedBy'].sort(),
    );
    expect(game.id).toMatch(/^[0-9a-f]{24}$/);
    expect(game.organisationId).toBe(acme.organisationId);
    expect(game.communityId).toBe('c'.repeat(24));
    expect(game.name).toBe('Spin to win');
    expect(game.type).toBe('spin-the-wheel');
    expect(game.details).toEqual({ en: valid.details.en, fr: { title: 'Tournez', description: '', light: none, dark: none } });
    expect(game.distributions).toEqual([]);
    expect(game.createdAt).toBe(game.updatedAt);
    expect(game.createdBy).toMatch(/^[0-9a-f]{24}$/);
    expect(game.updatedBy).toBe(game.createdBy);
    const stored = await t.service.store.readStream(`game-${game.id}`);
    expect(stored.map((event) => event.type)).toEqual(['GameCreated']);
    const read = await t.request('GET', `/api/v2/admin/games/${game.id}`, asAcme({ 'x-min-position': response.headers['x-event-position'] as string }));
    expect(read.status).toBe(200);
    expect(read.body).toEqual(game);
  });

  it('a game without a community belongs to the whole organisation', async () => {
    const { game } = await create({ ...valid, communityId: undefined });
    expect(game.communityId).toBeNull();
  });

  const invalid: [string, unknown, string][] = [
    ['name missing', { ...valid, name: undefined }, 'name'],
    ['name blank', { ...valid, name: '   ' }, 'name'],
    ['type missing', { ...valid, type: undefined }, 'type'],
    ['type not a slug', { ...valid, type: 'Spin The Wheel' }, 'type'],
    ['communityId not 24 hex', { ...valid, communityId: '123' }, 'communityId'],
    ['details missing', { ...valid, details: undefined }, 'details'],
    ['details with no language', { ...valid, details: {} }, 'details'],
    ['details under a key that is not a language', { ...valid, details: { '12': { title: 'x' } } }, 'details.12'],
    ['details without a title', { ...valid, details: { en: {} } }, 'details.en.title'],
  ];

  it.each(invalid)('POST /games, %s → 400 with issues, and no event appended', async (_case, body, path) => {
    const before = await t.eventCount();
    const response = await t.request('POST', '/api/v2/admin/games', { ...asAcme(), body });
    expect(response.status).toBe(400);
    expect(response.body.code).toBe('BAD_REQUEST');
    expect(response.body.issues.map((issue: { path: unknown[] }) => issue.path.join('.'))).toContain(path);
    expect(await t.eventCount()).toBe(before);
  });

  it('assigns prizes: 200 with the game id and each distribution with a new id, allocations with distributed and isLive', async () => {
    const { game } = await create();
    const response = await t.request('POST', `/api/v2/admin/games/${game.id}/distribution`, { ...asAcme(), body: prizes });
    expect(response.status).toBe(200);
    expect(Object.keys(response.body).sort()).toEqual(['distributions', 'gameConfigId']);
    expect(response.body.gameConfigId).toBe(game.id);
    const [first, second] = response.body.distributions;
    expect(Object.keys(first).sort()).toEqual(['bonusXpToDistribute', 'id', 'pointsToDistribute', 'rewardsConfig']);
    expect(first.id).toMatch(/^[0-9a-f]{24}$/);
    expect(second.id).toMatch(/^[0-9a-f]{24}$/);
    expect(first.id).not.toBe(second.id);
    expect(first).toEqual({
      id: first.id,
      pointsToDistribute: 10,
      bonusXpToDistribute: 0,
      rewardsConfig: { amountToDistribute: 1, allocations: [{ id: 'a'.repeat(24), rewardId, supply: 3, amountToDistribute: 1, distributed: 0, isLive: true }] },
    });
    const allocation = second.rewardsConfig.allocations[0];
    expect(allocation.id).toMatch(/^[0-9a-f]{24}$/);
    expect(allocation).toEqual({ id: allocation.id, rewardId, supply: 0, amountToDistribute: 1, distributed: 0, isLive: false });
    const stored = await t.service.store.readStream(`game-${game.id}`);
    expect(stored.map((event) => event.type)).toEqual(['GameCreated', 'GameDistributionsAssigned']);

    const read = await t.request('GET', `/api/v2/admin/games/${game.id}`, asAcme({ 'x-min-position': response.headers['x-event-position'] as string }));
    expect(read.body.distributions).toEqual(response.body.distributions);

    const again = await t.request('POST', `/api/v2/admin/games/${game.id}/distribution`, { ...asAcme(), body: { distributions: [prizes.distributions[1]] } });
    expect(again.body.distributions).toHaveLength(1);
    const replaced = await t.request('GET', `/api/v2/admin/games/${game.id}`, asAcme({ 'x-min-position': again.headers['x-event-position'] as string }));
    expect(replaced.body.distributions).toEqual(again.body.distributions);
  });

  const invalidPrizes: [string, unknown, string][] = [
    ['distributions missing', {}, 'distributions'],
    ['no distributions', { distributions: [] }, 'distributions'],
    ['points negative', { distributions: [{ pointsToDistribute: -1 }] }, 'distributions.0.pointsToDistribute'],
    ['bonus XP negative', { distributions: [{ bonusXpToDistribute: -1 }] }, 'distributions.0.bonusXpToDistribute'],
    [
      'allocation without supply',
      { distributions: [{ rewardsConfig: { allocations: [{ rewardId }] } }] },
      'distributions.0.rewardsConfig.allocations.0.supply',
    ],
    [
      'allocation rewardId not hex',
      { distributions: [{ rewardsConfig: { allocations: [{ rewardId: 'r1', supply: 1 }] } }] },
      'distributions.0.rewardsConfig.allocations.0.rewardId',
    ],
    [
      'one allocation id in two distributions',
      { distributions: [prizes.distributions[0], { rewardsConfig: { allocations: [{ id: 'A'.repeat(24), rewardId, supply: 1 }] } }] },
      'distributions.1.rewardsConfig.allocations.0.id',
    ],
  ];

  it.each(invalidPrizes)('POST /games/{id}/distribution, %s → 400, and no event appended', async (_case, body, path) => {
    const { game } = await create();
    const before = await t.eventCount();
    const response = await t.request('POST', `/api/v2/admin/games/${game.id}/distribution`, { ...asAcme(), body });
    expect(response.status).toBe(400);
    expect(response.body.issues.map((issue: { path: unknown[] }) => issue.path.join('.'))).toContain(path);
    expect(await t.eventCount()).toBe(before);
  });

  it('an unknown or malformed game → 404 on read and on distribution', async () => {
    for (const id of ['f'.repeat(24), 'game-1']) {
      expect((await t.request('GET', `/api/v2/admin/games/${id}`, asAcme())).status).toBe(404);
      const response = await t.request('POST', `/api/v2/admin/games/${id}/distribution`, { ...asAcme(), body: prizes });
      expect(response.status).toBe(404);
      expect(response.body.code).toBe('NOT_FOUND');
    }
  });

  it('never shows or changes one organisation’s game for another', async () => {
    const { game, position } = await create();
    const before = await t.eventCount();
    expect((await t.request('GET', `/api/v2/admin/games/${game.id}`, asBeta({ 'x-min-position': position }))).status).toBe(404);
    expect((await t.request('POST', `/api/v2/admin/games/${game.id}/distribution`, { ...asBeta(), body: prizes })).status).toBe(404);
    expect(await t.eventCount()).toBe(before);
  });

  it('401 without a token, and nothing appended', async () => {
    const { game } = await create();
    const before = await t.eventCount();
    for (const [method, path, body] of [
      ['POST', '/api/v2/admin/games', valid],
      ['GET', `/api/v2/admin/games/${game.id}`, undefined],
      ['POST', `/api/v2/admin/games/${game.id}/distribution`, prizes],
    ] as const) {
      const response = await t.request(method, path, { host: acme.domain, body });
      expect(response.status, `${method} ${path}`).toBe(401);
    }
    expect(await t.eventCount()).toBe(before);
  });

  it('describes the challenge, action, template and game routes in the admin OpenAPI document', async () => {
    const response = await t.request('GET', '/api/v2/admin/openapi.json', { host: acme.domain });
    expect(response.status).toBe(200);
    const { paths, components } = response.body;
    expect(Object.keys(paths)).toEqual(
      expect.arrayContaining([
        '/challenges',
        '/challenges/{challengeId}',
        '/actions/{actionId}/distribution',
        '/templates/challenges',
        '/games',
        '/games/{gameConfigId}',
        '/games/{gameConfigId}/distribution',
      ]),
    );
    expect(Object.keys(paths['/challenges'])).toEqual(expect.arrayContaining(['post', 'get']));
    expect(paths['/challenges/{challengeId}'].patch.requestBody.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/UpdateChallenge' });
    expect(components.schemas.CreateChallenge.required.sort()).toEqual(['actions', 'communityId', 'details', 'expiresAt', 'startsAt']);
    expect(components.schemas.ChallengeTemplate.required).toHaveLength(34);
    expect(paths['/templates/challenges'].get.parameters.map((p: { name: string }) => p.name)).toEqual(['limit', 'skip', 'x-language', 'x-min-position']);
    expect(paths['/games/{gameConfigId}/distribution'].post.responses['200'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/GameDistributions',
    });
    expect(components.schemas.GameDistribution.properties.rewardsConfig).toBeDefined();
  });
});
