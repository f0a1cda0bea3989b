import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type Tenant } from './support/service.ts';

const none = { primaryImageUrl: '', secondaryImageUrl: '' };
const block = (title: string) => ({ title, description: `${title}!`, light: none, dark: none });
const rewardId = 'd'.repeat(24);
const challenge = (details: Record<string, ReturnType<typeof block>>, extra: Record<string, unknown> = {}) => ({
  communityId: 'c'.repeat(24),
  details,
  actions: [
    {
      key: 'learn',
      category: 'knowledge',
      xp: 5,
      details: { en: block('Learn') },
      distribution: {
        pointsToDistribute: 3,
        bonusXpToDistribute: 1,
        rewardsConfig: { amountToDistribute: 1, allocations: [{ id: 'a'.repeat(24), rewardId, supply: 10, amountToDistribute: 2 }] },
      },
    },
    { key: 'share', category: 'influence', xp: 7, isSkippable: true, details: { en: block('Share') } },
    { key: 'learn-more', category: 'knowledge', xp: 8, details: { en: block('Learn more') }, distribution: { pointsToDistribute: 4, bonusXpToDistribute: 6 } },
  ],
  startsAt: '2099-01-01T00:00:00Z',
  expiresAt: '2099-02-01T00:00:00Z',
  ...extra,
});

describe('challenge templates over HTTP', () => {
  let t: TestService;
  type Org = Tenant;
  let acme: Org;
  let beta: Org;
  let gamma: Org;
  const as = (org: Org, extra: Record<string, string> = {}) => ({ host: org.domain, headers: { 'x-api-token': org.token, ...extra } });
  const create = async (org: Org, body: unknown) => {
    const response = await t.request('POST', '/api/v2/admin/challenges', { ...as(org), body });
    expect(response.status, JSON.stringify(response.body)).toBe(201);
    return { challenge: response.body, position: response.headers['x-event-position'] as string };
  };
  const templates = (org: Org, headers: Record<string, string>, query = '?limit=100') =>
    t.request('GET', `/api/v2/admin/templates/challenges${query}`, as(org, headers));

  beforeAll(async () => {
    t = await startTestService();
    acme = await t.createOrganisation('acme');
    beta = await t.createOrganisation('beta');
    gamma = await t.createOrganisation('gamma');
  });
  afterAll(async () => {
    await t.close();
  });

  it('shows a challenge as the contract’s template: every field, with its type and derived values', async () => {
    const { challenge: c, position } = await create(acme, challenge({ en: block('Quiz') }, { tags: ['t'], campaigns: ['c'], unlockPrice: 9, featured: true }));
    const response = await templates(acme, { 'x-min-position': position });
    expect(response.status).toBe(200);
    const template = response.body.edges.find((edge: { id: string }) => edge.id === c.id);
    expect(Object.keys(template).sort()).toEqual(
      [
        'id',
        'organisationId',
        'communityId',
        'additionalCommunityIds',
        'actionIds',
        'tags',
        'campaigns',
        'availableAsTemplateForOrganisations',
        'groupIds',
        'details',
        'maxCompletionsPerPeriod',
        'numberOfActions',
        'unlockPrice',
        'actionGroups',
        'isLinear',
        'isGlobalTemplate',
        'enabledForSingleView',
        'featured',
        'isSkippable',
        'startedCount',
        'completedCount',
        'uniqueUsersStartedCount',
        'uniqueUsersCompletedCount',
        'createdAt',
        'updatedAt',
        'startDate',
        'endDate',
        'startsAt',
        'expiresAt',
        'videoConfig',
        'xpConfig',
        'rewardDistribution',
        'actionsRewardDistribution',
        'threadId',
      ].sort(),
    );
    expect(template).toMatchObject({
      id: c.id,
      organisationId: acme.organisationId,
      communityId: 'c'.repeat(24),
      additionalCommunityIds: [],
      actionIds: c.actions.map((action: { id: string }) => action.id),
      tags: ['t'],
      campaigns: ['c'],
      availableAsTemplateForOrganisations: [],
      groupIds: [],
      details: block('Quiz'),
      maxCompletionsPerPeriod: 1,
      numberOfActions: 3,
      unlockPrice: 9,
      actionGroups: [],
      isLinear: false,
      isGlobalTemplate: false,
      enabledForSingleView: false,
      featured: true,
      isSkippable: true,
      startedCount: 0,
      completedCount: 0,
      uniqueUsersStartedCount: 0,
      uniqueUsersCompletedCount: 0,
      createdAt: c.createdAt,
      updatedAt: c.updatedAt,
      startDate: '2099-01-01T00:00:00.000Z',
      endDate: '2099-02-01T00:00:00.000Z',
      startsAt: '2099-01-01T00:00:00.000Z',
      expiresAt: '2099-02-01T00:00:00.000Z',
      videoConfig: { videoUrl: '', isVideoEnabled: false },
      xpConfig: { total: 20, knowledge: 13, creativity: 0, loyalty: 0, influence: 7, participation: 0, contribution: 0 },
      rewardDistribution: c.rewardDistribution,
      actionsRewardDistribution: { points: 7, xp: 7, rewardAllocations: [{ rewardId, allocationId: 'a'.repeat(24), amountToDistribute: 2 }] },
      threadId: '',
    });
    for (const field of ['id', 'organisationId', 'communityId', 'createdAt', 'updatedAt', 'startDate', 'endDate', 'startsAt', 'expiresAt', 'threadId']) {
      expect(typeof template[field], field).toBe('string');
    }
    for (const field of [
      'maxCompletionsPerPeriod',
      'numberOfActions',
      'unlockPrice',
      'startedCount',
      'completedCount',
      'uniqueUsersStartedCount',
      'uniqueUsersCompletedCount',
    ]) {
      expect(typeof template[field], field).toBe('number');
    }
    for (const field of ['isLinear', 'isGlobalTemplate', 'enabledForSingleView', 'featured', 'isSkippable']) {
      expect(typeof template[field], field).toBe('boolean');
    }
    expect(typeof template.rewardDistribution.distributionEventId).toBe('string');
  });

  it('picks the language: x-language, its primary subtag, the organisation default, then the first language', async () => {
    const fresh = await t.createOrganisation('languages');
    const { position: p1 } = await create(fresh, challenge({ fr: block('Bonjour'), en: block('Hello'), de: block('Hallo') }));
    const { position } = await create(fresh, challenge({ nl: block('Hoi'), es: block('Hola') }));
    const titles = async (headers: Record<string, string>) => {
      const response = await templates(fresh, { 'x-min-position': position > p1 ? position : p1, ...headers });
      expect(response.status).toBe(200);
      return response.body.edges.map((edge: { details: { title: string } }) => edge.details.title);
    };
    expect(await titles({ 'x-language': 'de' })).toEqual(['Hoi', 'Hallo']);
    expect(await titles({ 'x-language': 'ES' })).toEqual(['Hola', 'Hello']);
    expect(await titles({ 'x-language': 'fr-CA' })).toEqual(['Hoi', 'Bonjour']);
    expect(await titles({})).toEqual(['Hoi', 'Hello']);
    expect(await titles({ 'x-language': 'it' })).toEqual(['Hoi', 'Hello']);
    const bad = await templates(fresh, { 'x-language': 'not a language' });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('BAD_REQUEST');
  });

  it('lists an organisation’s own challenges, global templates and those shared with it, never others’', async () => {
    const own = await create(gamma, challenge({ en: block('Gamma own') }));
    const global = await create(beta, challenge({ en: block('Beta global') }, { isGlobalTemplate: true }));
    const shared = await create(beta, challenge({ en: block('Beta shared') }, { availableAsTemplateForOrganisations: [gamma.organisationId.toUpperCase()] }));
    const hidden = await create(beta, challenge({ en: block('Beta private') }, { availableAsTemplateForOrganisations: [acme.organisationId] }));
    const position = [own, global, shared, hidden]
      .map((c) => c.position)
      .sort()
      .at(-1)!;
    const response = await templates(gamma, { 'x-min-position': position });
    const ids = response.body.edges.map((edge: { id: string }) => edge.id);
    expect(ids).toContain(own.challenge.id);
    expect(ids).toContain(global.challenge.id);
    expect(ids).toContain(shared.challenge.id);
    expect(ids).not.toContain(hidden.challenge.id);
    expect(ids.indexOf(shared.challenge.id)).toBeLessThan(ids.indexOf(global.challenge.id));
    expect(response.body.totalCount).toBe(ids.length);
    const sharedTemplate = response.body.edges.find((edge: { id: string }) => edge.id === shared.challenge.id);
    expect(sharedTemplate.organisationId).toBe(beta.organisationId);
    expect(sharedTemplate.availableAsTemplateForOrganisations).toEqual([gamma.organisationId]);

    const acmeView = await templates(acme, { 'x-min-position': position });
    const acmeIds = acmeView.body.edges.map((edge: { id: string }) => edge.id);
    expect(acmeIds).toContain(hidden.challenge.id);
    expect(acmeIds).toContain(global.challenge.id);
    expect(acmeIds).not.toContain(own.challenge.id);
    expect(acmeIds).not.toContain(shared.challenge.id);

    const unshared = await t.request('PATCH', `/api/v2/admin/challenges/${shared.challenge.id}`, {
      ...as(beta),
      body: { availableAsTemplateForOrganisations: [] },
    });
    const after = await templates(gamma, { 'x-min-position': unshared.headers['x-event-position'] as string });
    expect(after.body.edges.map((edge: { id: string }) => edge.id)).not.toContain(shared.challenge.id);
  });

  it('paginates with limit and skip, newest first', async () => {
    const fresh = await t.createOrganisation('template-pages');
    const ids: string[] = [];
    let position = '';
    for (let i = 0; i < 3; i++) {
      const created = await create(fresh, challenge({ en: block(`T${i}`) }));
      ids.push(created.challenge.id);
      position = created.position;
    }
    const all = await templates(fresh, { 'x-min-position': position }, '?limit=100');
    const total = all.body.totalCount;
    expect(all.body.edges.slice(0, 3).map((edge: { id: string }) => edge.id)).toEqual([...ids].reverse());
    const page = await templates(fresh, {}, '?limit=2&skip=1');
    expect(page.body.totalCount).toBe(total);
    expect(page.body.edges.map((edge: { id: string }) => edge.id)).toEqual([ids[1], ids[0]]);
    expect((await templates(fresh, {}, '?limit=10')).body.edges.length).toBeLessThanOrEqual(10);
    for (const query of ['?limit=0', '?limit=101', '?skip=-1']) expect((await templates(fresh, {}, query)).status, query).toBe(400);
  });

  it('401 without a token', async () => {
    const response = await t.request('GET', '/api/v2/admin/templates/challenges', { host: acme.domain });
    expect(response.status).toBe(401);
    expect(response.body.code).toBe('UNAUTHORIZED');
  });
});
