import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, asTenant, type Tenant } from './support/service.ts';

const images = { primaryImageUrl: 'https://cdn.example.com/a.png', secondaryImageUrl: '' };
const block = (title: string) => ({ title, description: `${title} description`, light: images, dark: images });
const communityId = 'c'.repeat(24);
const rewardId = 'd'.repeat(24);

const valid = {
  communityId,
  details: { en: block('Coffee lover'), fr: block('Amateur de café') },
  actions: [
    {
      key: 'coffee-ordered',
      category: 'loyalty',
      criteria: [
        { field: 'order.total', operator: 'gte', value: 5 },
        { field: 'size', operator: 'in', value: ['M', 'L'] },
        { field: 'promo', operator: 'exists' },
      ],
      xp: 10,
      isSkippable: false,
      details: { en: block('Order a coffee') },
      distribution: {
        pointsToDistribute: 5,
        bonusXpToDistribute: 2,
        rewardsConfig: { amountToDistribute: 1, allocations: [{ id: 'a'.repeat(24), rewardId, supply: 100, amountToDistribute: 1 }] },
      },
    },
    {
      key: 'review-written',
      category: 'creativity',
      criteria: [{ field: 'text', operator: 'contains', value: 'coffee' }],
      xp: 20,
      isSkippable: true,
      details: { en: block('Review') },
    },
  ],
  isLinear: true,
  maxCompletionsPerPeriod: 2,
  period: 'weekly',
  startsAt: '2099-01-05T00:00:00Z',
  expiresAt: '2099-03-30T00:00:00+02:00',
  tags: ['coffee'],
  campaigns: ['spring'],
  rewardDistribution: {
    points: 50,
    xp: 25,
    distributionEventId: 'E'.repeat(24),
    rewardAllocations: [{ rewardId, allocationId: 'b'.repeat(24), amountToDistribute: 1 }],
    numberOfRewardsToReceive: 1,
  },
  isGlobalTemplate: false,
  availableAsTemplateForOrganisations: [],
  featured: true,
  unlockPrice: 30,
  videoConfig: { videoUrl: 'https://video.example.com/v.mp4', isVideoEnabled: true },
};

describe('challenges over HTTP', () => {
  let t: TestService;
  let acme: Tenant;
  let beta: Tenant;
  const asAcme = (extra: Record<string, string> = {}) => asTenant(acme, extra);
  const asBeta = (extra: Record<string, string> = {}) => asTenant(beta, extra);
  const create = async (body: unknown = valid, as = asAcme()) => {
    const response = await t.request('POST', '/api/v2/admin/challenges', { ...as, body });
    expect(response.status, JSON.stringify(response.body)).toBe(201);
    return { challenge: response.body, position: response.headers['x-event-position'] as string };
  };

  beforeAll(async () => {
    t = await startTestService();
    acme = await t.createOrganisation('acme');
    beta = await t.createOrganisation('beta');
  });
  afterAll(async () => {
    await t.close();
  });

  it('creates a challenge: 201 with the whole challenge, ids for it and its actions, and the position it wrote', async () => {
    const response = await t.request('POST', '/api/v2/admin/challenges', { ...asAcme(), body: valid });
    expect(response.status).toBe(201);
    const c = response.body;
    expect(Object.keys(c).sort()).toEqual(
      [
        'actions',
        'availableAsTemplateForOrganisations',
        'campaigns',
        'communityId',
        'createdAt',
        'createdBy',
        'details',
        'expiresAt',
        'featured',
        'id',
        'isGlobalTemplate',
        'isLinear',
        'maxCompletionsPerPeriod',
        'organisationId',
        'period',
        'rewardDistribution',
        'startsAt',
        'tags',
        'unlockPrice',
        'updatedAt',
        'updatedBy',
        'videoConfig',
      ].sort(),
    );
    expect(c.id).toMatch(/^[0-9a-f]{24}$/);
    expect(c.organisationId).toBe(acme.organisationId);
    expect(c.communityId).toBe(communityId);
    expect(c.details).toEqual(valid.details);
    expect(Object.keys(c.details)).toEqual(['en', 'fr']);
    expect(c.actions).toHaveLength(2);
    const [first, second] = c.actions;
    expect(Object.keys(first).sort()).toEqual(['category', 'criteria', 'details', 'distribution', 'id', 'isSkippable', 'key', 'xp']);
    expect(first.id).toMatch(/^[0-9a-f]{24}$/);
    expect(second.id).toMatch(/^[0-9a-f]{24}$/);
    expect(first.id).not.toBe(second.id);
    expect(first).toMatchObject({ key: 'coffee-ordered', category: 'loyalty', criteria: valid.actions[0]!.criteria, xp: 10, isSkippable: false });
    expect(first.details).toEqual(valid.actions[0]!.details);
    expect(first.distribution).toEqual({
      actionId: first.id,
      pointsToDistribute: 5,
      bonusXpToDistribute: 2,
      rewardsConfig: {
        amountToDistribute: 1,
        allocations: [{ id: 'a'.repeat(24), rewardId, supply: 100, amountToDistribute: 1, distributed: 0, isLive: true }],
      },
    });
    expect(second).toMatchObject({ key: 'review-written', category: 'creativity', xp: 20, isSkippable: true, distribution: null });
    expect(c.isLinear).toBe(true);
    expect(c.maxCompletionsPerPeriod).toBe(2);
    expect(c.period).toBe('weekly');
    expect(c.startsAt).toBe('2099-01-05T00:00:00.000Z');
    expect(c.expiresAt).toBe('2099-03-29T22:00:00.000Z');
    expect(c.tags).toEqual(['coffee']);
    expect(c.campaigns).toEqual(['spring']);
    expect(c.rewardDistribution).toEqual({ ...valid.rewardDistribution, distributionEventId: 'e'.repeat(24) });
    expect(c.isGlobalTemplate).toBe(false);
    expect(c.availableAsTemplateForOrganisations).toEqual([]);
    expect(c.featured).toBe(true);
    expect(c.unlockPrice).toBe(30);
    expect(c.videoConfig).toEqual(valid.videoConfig);
    expect(c.createdAt).toBe(c.updatedAt);
    expect(Number.isNaN(Date.parse(c.createdAt))).toBe(false);
    expect(c.createdBy).toMatch(/^[0-9a-f]{24}$/);
    expect(c.updatedBy).toBe(c.createdBy);
    expect(response.headers['x-event-position']).toMatch(/^[0-9a-f]{32}$/);

    const stored = await t.service.store.readStream(`challenge-${c.id}`);
    expect(stored.map((event) => event.type)).toEqual(['ChallengeCreated']);
    expect(stored[0]!.metadata).toMatchObject({ organisationId: acme.organisationId, actor: c.createdBy });
    expect(await t.service.store.readStream(`action-${first.id}`)).toEqual([]);

    const read = await t.request('GET', `/api/v2/admin/challenges/${c.id}`, asAcme({ 'x-min-position': response.headers['x-event-position'] as string }));
    expect(read.status).toBe(200);
    expect(read.body).toEqual(c);
  });

  it('applies the defaults', async () => {
    const { challenge } = await create({
      communityId,
      details: { en: { title: 'Minimal' } },
      actions: [{ key: 'visit', category: 'participation', details: { en: { title: 'Visit' } } }],
      startsAt: '2099-01-01',
      expiresAt: '2099-02-01',
    });
    const none = { primaryImageUrl: '', secondaryImageUrl: '' };
    expect(challenge.details).toEqual({ en: { title: 'Minimal', description: '', light: none, dark: none } });
    expect(challenge.actions[0]).toMatchObject({ key: 'visit', criteria: [], xp: 0, isSkippable: false, distribution: null });
    expect(challenge).toMatchObject({
      isLinear: false,
      maxCompletionsPerPeriod: 1,
      period: 'open',
      startsAt: '2099-01-01T00:00:00.000Z',
      tags: [],
      campaigns: [],
      isGlobalTemplate: false,
      availableAsTemplateForOrganisations: [],
      featured: false,
      unlockPrice: 0,
      videoConfig: { videoUrl: '', isVideoEnabled: false },
    });
    expect(challenge.rewardDistribution).toMatchObject({ points: 0, xp: 0, rewardAllocations: [], numberOfRewardsToReceive: 0 });
    expect(challenge.rewardDistribution.distributionEventId).toMatch(/^[0-9a-f]{24}$/);
  });

  it('accepts every category and operator the design lists', async () => {
    const actions = ['knowledge', 'creativity', 'loyalty', 'influence', 'participation', 'contribution'].map((category) => ({
      key: category,
      category,
      details: { en: { title: category } },
      criteria: [
        { field: 'a', operator: 'eq', value: 'x' },
        { field: 'b', operator: 'neq', value: false },
        { field: 'c', operator: 'gt', value: 1 },
        { field: 'd', operator: 'gte', value: 1.5 },
        { field: 'e', operator: 'lt', value: -1 },
        { field: 'f', operator: 'lte', value: 0 },
        { field: 'g', operator: 'in', value: [1, 'two', true] },
        { field: 'h', operator: 'exists', value: false },
        { field: 'i.j', operator: 'contains', value: 'k' },
      ],
    }));
    const { challenge } = await create({ ...valid, actions });
    expect(challenge.actions.map((action: { category: string }) => action.category)).toEqual(actions.map((action) => action.category));
  });

  const action = valid.actions[0]!;
  const withAction = (patch: Record<string, unknown>) => ({ ...valid, actions: [{ ...action, ...patch }, valid.actions[1]] });
  const withCriterion = (criterion: unknown) => withAction({ criteria: [criterion] });
  const invalid: [string, unknown, string][] = [
    ['communityId missing', { ...valid, communityId: undefined }, 'communityId'],
    ['communityId not 24 hex', { ...valid, communityId: 'abc' }, 'communityId'],
    ['details missing', { ...valid, details: undefined }, 'details'],
    ['details with no language', { ...valid, details: {} }, 'details'],
    ['details under a key that is not a language', { ...valid, details: { english: block('x') } }, 'details.english'],
    ['a language given twice', { ...valid, details: { en: block('a'), EN: block('b') } }, 'details.EN'],
    ['details without a title', { ...valid, details: { en: { description: 'x' } } }, 'details.en.title'],
    [
      'an image that is not a URL',
      { ...valid, details: { en: { ...block('x'), light: { primaryImageUrl: 'javascript:alert(1)' } } } },
      'details.en.light.primaryImageUrl',
    ],
    ['actions missing', { ...valid, actions: undefined }, 'actions'],
    ['no actions', { ...valid, actions: [] }, 'actions'],
    ['action key missing', withAction({ key: undefined }), 'actions.0.key'],
    ['action key with surrounding spaces', withAction({ key: ' coffee ' }), 'actions.0.key'],
    ['two actions with the same key', { ...valid, actions: [action, { ...valid.actions[1], key: action.key }] }, 'actions.1.key'],
    ['action category unknown', withAction({ category: 'fun' }), 'actions.0.category'],
    ['action xp negative', withAction({ xp: -1 }), 'actions.0.xp'],
    ['action xp not a number', withAction({ xp: '10' }), 'actions.0.xp'],
    ['action isSkippable not a boolean', withAction({ isSkippable: 'yes' }), 'actions.0.isSkippable'],
    ['action details missing', withAction({ details: undefined }), 'actions.0.details'],
    ['every action skippable', { ...valid, actions: [{ ...action, isSkippable: true }, valid.actions[1]] }, 'actions'],
    ['criterion field missing', withCriterion({ operator: 'eq', value: 1 }), 'actions.0.criteria.0.field'],
    ['criterion field not a dot path', withCriterion({ field: 'a..b', operator: 'eq', value: 1 }), 'actions.0.criteria.0.field'],
    ['criterion operator unknown', withCriterion({ field: 'a', operator: 'like', value: 'x' }), 'actions.0.criteria.0.operator'],
    ['eq without a value', withCriterion({ field: 'a', operator: 'eq' }), 'actions.0.criteria.0.value'],
    ['eq with an array', withCriterion({ field: 'a', operator: 'eq', value: [1] }), 'actions.0.criteria.0.value'],
    ['neq without a value', withCriterion({ field: 'a', operator: 'neq' }), 'actions.0.criteria.0.value'],
    ['gt with a string', withCriterion({ field: 'a', operator: 'gt', value: '5' }), 'actions.0.criteria.0.value'],
    ['gte without a value', withCriterion({ field: 'a', operator: 'gte' }), 'actions.0.criteria.0.value'],
    ['lt with a boolean', withCriterion({ field: 'a', operator: 'lt', value: true }), 'actions.0.criteria.0.value'],
    ['lte with an array', withCriterion({ field: 'a', operator: 'lte', value: [1] }), 'actions.0.criteria.0.value'],
    ['in with a scalar', withCriterion({ field: 'a', operator: 'in', value: 'x' }), 'actions.0.criteria.0.value'],
    ['in with an empty array', withCriterion({ field: 'a', operator: 'in', value: [] }), 'actions.0.criteria.0.value'],
    ['exists with a string', withCriterion({ field: 'a', operator: 'exists', value: 'yes' }), 'actions.0.criteria.0.value'],
    ['contains without a value', withCriterion({ field: 'a', operator: 'contains' }), 'actions.0.criteria.0.value'],
    ['a criterion value that is an object', withCriterion({ field: 'a', operator: 'eq', value: { x: 1 } }), 'actions.0.criteria.0.value'],
    ['distribution points negative', withAction({ distribution: { pointsToDistribute: -1 } }), 'actions.0.distribution.pointsToDistribute'],
    ['distribution bonus XP negative', withAction({ distribution: { bonusXpToDistribute: -5 } }), 'actions.0.distribution.bonusXpToDistribute'],
    [
      'distribution with an allocation id twice',
      withAction({
        distribution: {
          rewardsConfig: {
            allocations: [
              { id: 'a'.repeat(24), rewardId, supply: 1 },
              { id: 'A'.repeat(24), rewardId, supply: 1 },
            ],
          },
        },
      }),
      'actions.0.distribution',
    ],
    ['isLinear not a boolean', { ...valid, isLinear: 'true' }, 'isLinear'],
    ['maxCompletionsPerPeriod 0', { ...valid, maxCompletionsPerPeriod: 0 }, 'maxCompletionsPerPeriod'],
    ['maxCompletionsPerPeriod not whole', { ...valid, maxCompletionsPerPeriod: 1.5 }, 'maxCompletionsPerPeriod'],
    ['period unknown', { ...valid, period: 'hourly' }, 'period'],
    ['startsAt missing', { ...valid, startsAt: undefined }, 'startsAt'],
    ['startsAt not a date', { ...valid, startsAt: 'tomorrow' }, 'startsAt'],
    ['expiresAt missing', { ...valid, expiresAt: undefined }, 'expiresAt'],
    ['expiresAt before startsAt', { ...valid, expiresAt: '2099-01-01T00:00:00Z' }, 'expiresAt'],
    ['expiresAt equal to startsAt', { ...valid, expiresAt: valid.startsAt }, 'expiresAt'],
    ['tags not strings', { ...valid, tags: [1] }, 'tags.0'],
    ['an empty campaign', { ...valid, campaigns: [''] }, 'campaigns.0'],
    ['reward points negative', { ...valid, rewardDistribution: { ...valid.rewardDistribution, points: -1 } }, 'rewardDistribution.points'],
    [
      'reward distributionEventId not hex',
      { ...valid, rewardDistribution: { ...valid.rewardDistribution, distributionEventId: 'x' } },
      'rewardDistribution.distributionEventId',
    ],
    [
      'more rewards to receive than allocations',
      { ...valid, rewardDistribution: { ...valid.rewardDistribution, numberOfRewardsToReceive: 2 } },
      'rewardDistribution.numberOfRewardsToReceive',
    ],
    [
      'a reward allocation twice',
      {
        ...valid,
        rewardDistribution: {
          ...valid.rewardDistribution,
          rewardAllocations: [valid.rewardDistribution.rewardAllocations[0], valid.rewardDistribution.rewardAllocations[0]],
        },
      },
      'rewardDistribution.rewardAllocations.1.allocationId',
    ],
    ['isGlobalTemplate not a boolean', { ...valid, isGlobalTemplate: 1 }, 'isGlobalTemplate'],
    ['a template organisation not hex', { ...valid, availableAsTemplateForOrganisations: ['acme'] }, 'availableAsTemplateForOrganisations.0'],
    ['featured not a boolean', { ...valid, featured: 'no' }, 'featured'],
    ['unlockPrice negative', { ...valid, unlockPrice: -1 }, 'unlockPrice'],
    ['video enabled without a URL', { ...valid, videoConfig: { isVideoEnabled: true } }, 'videoConfig.videoUrl'],
    ['video URL not a URL', { ...valid, videoConfig: { videoUrl: 'not a url', isVideoEnabled: true } }, 'videoConfig.videoUrl'],
    ['a body that is not an object', ['communityId'], ''],
  ];

  it.each(invalid)('POST /challenges, %s → 400 with issues, and no event appended', async (_case, body, path) => {
    const before = await t.eventCount();
    const response = await t.request('POST', '/api/v2/admin/challenges', { ...asAcme(), body });
    expect(response.status).toBe(400);
    expect(response.body.code).toBe('BAD_REQUEST');
    expect(response.body.message).toBe('Invalid input data');
    expect(response.body.issues.map((issue: { path: unknown[] }) => issue.path.join('.'))).toContain(path);
    expect(await t.eventCount()).toBe(before);
  });

  it('every endpoint answers 401 without a token, and appends nothing', async () => {
    const { challenge } = await create();
    const before = await t.eventCount();
    const calls: [string, string, unknown][] = [
      ['POST', '/api/v2/admin/challenges', valid],
      ['GET', '/api/v2/admin/challenges', undefined],
      ['GET', `/api/v2/admin/challenges/${challenge.id}`, undefined],
      ['PATCH', `/api/v2/admin/challenges/${challenge.id}`, { featured: false }],
      ['POST', `/api/v2/admin/actions/${challenge.actions[0].id}/distribution`, { pointsToDistribute: 1 }],
    ];
    for (const [method, path, body] of calls) {
      const response = await t.request(method, path, { host: acme.domain, body });
      expect(response.status, `${method} ${path}`).toBe(401);
      expect(response.body.code).toBe('UNAUTHORIZED');
    }
    expect(await t.eventCount()).toBe(before);
  });

  it('lists the organisation’s challenges newest first, paginated', async () => {
    const fresh = await t.createOrganisation('pager');
    const as = { host: fresh.domain, headers: { 'x-api-token': fresh.token } };
    const ids: string[] = [];
    let position = '';
    for (let i = 0; i < 12; i++) {
      const created = await create({ ...valid, details: { en: block(`Challenge ${i}`) } }, as);
      ids.push(created.challenge.id);
      position = created.position;
    }
    const first = await t.request('GET', '/api/v2/admin/challenges', { ...as, headers: { ...as.headers, 'x-min-position': position } });
    expect(first.status).toBe(200);
    expect(first.body.totalCount).toBe(12);
    expect(first.body.edges.map((edge: { id: string }) => edge.id)).toEqual([...ids].reverse().slice(0, 10));
    expect(first.body.edges[0].details.en.title).toBe('Challenge 11');
    const second = await t.request('GET', '/api/v2/admin/challenges?limit=5&skip=10', as);
    expect(second.body.edges.map((edge: { id: string }) => edge.id)).toEqual([ids[1], ids[0]]);
    for (const query of ['limit=0', 'limit=101', 'skip=-1', 'limit=x']) {
      expect((await t.request('GET', `/api/v2/admin/challenges?${query}`, as)).status, query).toBe(400);
    }
  });

  it('never shows, changes or distributes one organisation’s challenge for another', async () => {
    const { challenge, position } = await create();
    const before = await t.eventCount();
    expect((await t.request('GET', `/api/v2/admin/challenges/${challenge.id}`, asBeta({ 'x-min-position': position }))).status).toBe(404);
    const list = await t.request('GET', '/api/v2/admin/challenges?limit=100', asBeta({ 'x-min-position': position }));
    expect(list.body.edges.map((edge: { organisationId: string }) => edge.organisationId)).not.toContain(acme.organisationId);
    const patched = await t.request('PATCH', `/api/v2/admin/challenges/${challenge.id}`, { ...asBeta(), body: { featured: false } });
    expect(patched.status).toBe(404);
    expect(patched.body.code).toBe('NOT_FOUND');
    const distributed = await t.request('POST', `/api/v2/admin/actions/${challenge.actions[0].id}/distribution`, {
      ...asBeta({ 'x-min-position': position }),
      body: { pointsToDistribute: 1 },
    });
    expect(distributed.status).toBe(404);
    expect(await t.eventCount()).toBe(before);
  });

  it('an unknown or malformed challenge id → 404', async () => {
    for (const id of ['f'.repeat(24), 'not-an-id']) {
      const read = await t.request('GET', `/api/v2/admin/challenges/${id}`, asAcme());
      expect(read.status).toBe(404);
      expect(read.body.code).toBe('NOT_FOUND');
      expect((await t.request('PATCH', `/api/v2/admin/challenges/${id}`, { ...asAcme(), body: { featured: false } })).status).toBe(404);
    }
  });

  describe('PATCH /challenges/{id}', () => {
    it('changes details, dates and flags; answers the whole challenge; reads show it', async () => {
      const { challenge } = await create();
      const response = await t.request('PATCH', `/api/v2/admin/challenges/${challenge.id}`, {
        ...asAcme(),
        body: {
          details: { de: block('Kaffee') },
          startsAt: '2099-02-01T00:00:00Z',
          expiresAt: '2099-06-01T00:00:00Z',
          featured: false,
          isGlobalTemplate: true,
          tags: ['a', 'b'],
          maxCompletionsPerPeriod: 3,
          period: 'daily',
          unlockPrice: 0,
        },
      });
      expect(response.status).toBe(200);
      const changed = response.body;
      expect(changed.details).toEqual({ de: block('Kaffee') });
      expect(changed).toMatchObject({
        id: challenge.id,
        startsAt: '2099-02-01T00:00:00.000Z',
        expiresAt: '2099-06-01T00:00:00.000Z',
        featured: false,
        isGlobalTemplate: true,
        tags: ['a', 'b'],
        maxCompletionsPerPeriod: 3,
        period: 'daily',
        unlockPrice: 0,
        createdAt: challenge.createdAt,
      });
      expect(changed.actions).toEqual(challenge.actions);
      expect(Date.parse(changed.updatedAt)).toBeGreaterThanOrEqual(Date.parse(challenge.updatedAt));
      const stored = await t.service.store.readStream(`challenge-${challenge.id}`);
      expect(stored.map((event) => event.type)).toEqual(['ChallengeCreated', 'ChallengeUpdated']);
      const read = await t.request(
        'GET',
        `/api/v2/admin/challenges/${challenge.id}`,
        asAcme({ 'x-min-position': response.headers['x-event-position'] as string }),
      );
      expect(read.body).toEqual(changed);
    });

    it('replaces the actions before the start: a named action keeps its id and distribution, the others are new', async () => {
      const { challenge, position } = await create();
      const [kept, dropped] = challenge.actions;
      const response = await t.request('PATCH', `/api/v2/admin/challenges/${challenge.id}`, {
        ...asAcme(),
        body: {
          actions: [
            { key: 'brand-new', category: 'knowledge', xp: 7, details: { en: block('New') } },
            { id: kept.id, key: 'coffee-ordered-again', category: 'loyalty', xp: 11, details: { en: block('Order again') } },
          ],
          isLinear: false,
        },
      });
      expect(response.status).toBe(200);
      const [fresh, same] = response.body.actions;
      expect(fresh.id).toMatch(/^[0-9a-f]{24}$/);
      expect([kept.id, dropped.id]).not.toContain(fresh.id);
      expect(fresh).toMatchObject({ key: 'brand-new', xp: 7, distribution: null });
      expect(same).toMatchObject({ id: kept.id, key: 'coffee-ordered-again', xp: 11, distribution: kept.distribution });
      expect(response.body.isLinear).toBe(false);
      const after = response.headers['x-event-position'] as string;
      const gone = await t.request('POST', `/api/v2/admin/actions/${dropped.id}/distribution`, { ...asAcme({ 'x-min-position': after }), body: {} });
      expect(gone.status).toBe(404);
      const added = await t.request('POST', `/api/v2/admin/actions/${fresh.id}/distribution`, { ...asAcme({ 'x-min-position': after }), body: {} });
      expect(added.status).toBe(200);
      expect(position).toBeTruthy();
    });

    it('refuses to change actions, isLinear or startsAt once the challenge has started (409), and appends nothing', async () => {
      const { challenge } = await create({ ...valid, startsAt: '2020-01-01T00:00:00Z' });
      const before = await t.eventCount();
      const attempts = [
        { actions: [{ key: 'other', category: 'loyalty', details: { en: block('Other') } }] },
        { isLinear: false },
        { startsAt: '2021-01-01T00:00:00Z' },
      ];
      for (const body of attempts) {
        const response = await t.request('PATCH', `/api/v2/admin/challenges/${challenge.id}`, { ...asAcme(), body });
        expect(response.status, JSON.stringify(body)).toBe(409);
        expect(response.body.code).toBe('CONFLICT');
      }
      expect(await t.eventCount()).toBe(before);
      const allowed = await t.request('PATCH', `/api/v2/admin/challenges/${challenge.id}`, {
        ...asAcme(),
        body: { featured: false, isLinear: true, expiresAt: '2099-12-31' },
      });
      expect(allowed.status).toBe(200);
    });

    const invalidPatches: [string, unknown, string][] = [
      ['an empty body', {}, ''],
      ['communityId (cannot change)', { communityId }, ''],
      ['an unknown field', { colour: 'red' }, ''],
      ['expiresAt before the stored startsAt', { expiresAt: '2098-01-01T00:00:00Z' }, ''],
      ['expiresAt before the given startsAt', { startsAt: '2099-05-01', expiresAt: '2099-04-01' }, 'expiresAt'],
      ['details with no language', { details: {} }, 'details'],
      ['no actions', { actions: [] }, 'actions'],
      ['two actions with the same key', { actions: [action, { ...action }] }, 'actions.1.key'],
      ['an action id that is not one of the challenge’s', { actions: [{ ...action, id: 'f'.repeat(24) }] }, ''],
      ['a criterion without its value', { actions: [{ ...action, criteria: [{ field: 'a', operator: 'gt' }] }] }, 'actions.0.criteria.0.value'],
      ['featured not a boolean', { featured: 'yes' }, 'featured'],
      ['maxCompletionsPerPeriod 0', { maxCompletionsPerPeriod: 0 }, 'maxCompletionsPerPeriod'],
      ['video enabled without a URL', { videoConfig: { isVideoEnabled: true } }, 'videoConfig.videoUrl'],
    ];

    it.each(invalidPatches)('%s → 400, and no event appended', async (_case, body, path) => {
      const { challenge } = await create();
      const before = await t.eventCount();
      const response = await t.request('PATCH', `/api/v2/admin/challenges/${challenge.id}`, { ...asAcme(), body });
      expect(response.status).toBe(400);
      expect(response.body.code).toBe('BAD_REQUEST');
      expect(response.body.issues.length).toBeGreaterThan(0);
      if (path) expect(response.body.issues.map((issue: { path: unknown[] }) => issue.path.join('.'))).toContain(path);
      expect(await t.eventCount()).toBe(before);
    });
  });

  describe('POST /actions/{actionId}/distribution', () => {
    const entry = {
      pointsToDistribute: 10,
      bonusXpToDistribute: 3,
      rewardsConfig: {
        amountToDistribute: 2,
        allocations: [
          { rewardId, supply: 5, amountToDistribute: 1 },
          { id: 'F'.repeat(24), rewardId, supply: 0 },
        ],
      },
    };

    it('assigns the entry: 200 with the action id, allocation ids, nothing distributed; the challenge shows it', async () => {
      const { challenge, position } = await create();
      const actionId = challenge.actions[1].id;
      const response = await t.request('POST', `/api/v2/admin/actions/${actionId}/distribution`, { ...asAcme({ 'x-min-position': position }), body: entry });
      expect(response.status).toBe(200);
      expect(Object.keys(response.body).sort()).toEqual(['actionId', 'bonusXpToDistribute', 'pointsToDistribute', 'rewardsConfig']);
      expect(response.body.actionId).toBe(actionId);
      expect(response.body.pointsToDistribute).toBe(10);
      expect(response.body.bonusXpToDistribute).toBe(3);
      expect(response.body.rewardsConfig.amountToDistribute).toBe(2);
      const [generated, given] = response.body.rewardsConfig.allocations;
      expect(generated.id).toMatch(/^[0-9a-f]{24}$/);
      expect(generated).toEqual({ id: generated.id, rewardId, supply: 5, amountToDistribute: 1, distributed: 0, isLive: true });
      expect(given).toEqual({ id: 'f'.repeat(24), rewardId, supply: 0, amountToDistribute: 1, distributed: 0, isLive: false });
      const stored = await t.service.store.readStream(`challenge-${challenge.id}`);
      expect(stored.map((event) => event.type)).toEqual(['ChallengeCreated', 'ActionDistributionAssigned']);
      const read = await t.request(
        'GET',
        `/api/v2/admin/challenges/${challenge.id}`,
        asAcme({ 'x-min-position': response.headers['x-event-position'] as string }),
      );
      expect(read.body.actions[1].distribution).toEqual(response.body);
      expect(read.body.actions[0].distribution).toEqual(challenge.actions[0].distribution);
    });

    it('defaults every amount to 0', async () => {
      const { challenge, position } = await create();
      const response = await t.request('POST', `/api/v2/admin/actions/${challenge.actions[0].id}/distribution`, {
        ...asAcme({ 'x-min-position': position }),
        body: {},
      });
      expect(response.body).toEqual({
        actionId: challenge.actions[0].id,
        pointsToDistribute: 0,
        bonusXpToDistribute: 0,
        rewardsConfig: { amountToDistribute: 0, allocations: [] },
      });
    });

    it('an unknown or malformed action id → 404', async () => {
      for (const id of ['f'.repeat(24), 'xyz']) {
        const response = await t.request('POST', `/api/v2/admin/actions/${id}/distribution`, { ...asAcme(), body: entry });
        expect(response.status).toBe(404);
        expect(response.body.code).toBe('NOT_FOUND');
      }
    });

    const invalidEntries: [string, unknown, string][] = [
      ['pointsToDistribute negative', { ...entry, pointsToDistribute: -1 }, 'pointsToDistribute'],
      ['bonusXpToDistribute negative', { ...entry, bonusXpToDistribute: -0.5 }, 'bonusXpToDistribute'],
      ['pointsToDistribute not a number', { ...entry, pointsToDistribute: '10' }, 'pointsToDistribute'],
      ['an allocation without rewardId', { ...entry, rewardsConfig: { allocations: [{ supply: 1 }] } }, 'rewardsConfig.allocations.0.rewardId'],
      ['an allocation with a negative supply', { ...entry, rewardsConfig: { allocations: [{ rewardId, supply: -1 }] } }, 'rewardsConfig.allocations.0.supply'],
      [
        'an allocation id twice',
        {
          ...entry,
          rewardsConfig: {
            allocations: [
              { id: 'a'.repeat(24), rewardId, supply: 1 },
              { id: 'a'.repeat(24), rewardId, supply: 1 },
            ],
          },
        },
        'rewardsConfig.allocations.1.id',
      ],
      ['a body that is not an object', [1], ''],
    ];

    it.each(invalidEntries)('%s → 400, and no event appended', async (_case, body, path) => {
      const { challenge, position } = await create();
      const before = await t.eventCount();
      const response = await t.request('POST', `/api/v2/admin/actions/${challenge.actions[0].id}/distribution`, {
        ...asAcme({ 'x-min-position': position }),
        body,
      });
      expect(response.status).toBe(400);
      expect(response.body.issues.map((issue: { path: unknown[] }) => issue.path.join('.'))).toContain(path);
      expect(await t.eventCount()).toBe(before);
    });
  });
});
