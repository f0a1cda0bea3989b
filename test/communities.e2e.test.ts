import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, asTenant, type Tenant } from './support/service.ts';

const details = {
  en: {
    title: 'Runners',
    description: 'People who run',
    light: { primaryImageUrl: 'https://img.example/l1.png', secondaryImageUrl: 'https://img.example/l2.png' },
    dark: { primaryImageUrl: 'https://img.example/d1.png', secondaryImageUrl: 'https://img.example/d2.png' },
  },
};
const valid = { name: 'Runners', description: 'All runners', details };

describe('communities over HTTP', () => {
  let t: TestService;
  let acme: Tenant;
  let beta: Tenant;
  const asAcme = (extra: Record<string, string> = {}) => asTenant(acme, extra);
  const asBeta = (extra: Record<string, string> = {}) => asTenant(beta, extra);

  beforeAll(async () => {
    t = await startTestService();
    acme = await t.createOrganisation('acme');
    beta = await t.createOrganisation('beta');
  });
  afterAll(async () => {
    await t.close();
  });

  it('creates a community: 201 with every field, readable at its id', async () => {
    const response = await t.request('POST', '/api/v2/admin/communities', { ...asAcme(), body: valid });
    expect(response.status).toBe(201);
    const community = response.body;
    expect(Object.keys(community).sort()).toEqual([
      'createdAt',
      'createdBy',
      'description',
      'details',
      'id',
      'name',
      'organisationId',
      'updatedAt',
      'updatedBy',
    ]);
    expect(community.id).toMatch(/^[0-9a-f]{24}$/);
    expect(community.organisationId).toBe(acme.organisationId);
    expect(community.name).toBe('Runners');
    expect(community.description).toBe('All runners');
    expect(community.details).toEqual(details);
    expect(community.createdAt).toBe(community.updatedAt);
    expect(Number.isNaN(Date.parse(community.createdAt))).toBe(false);
    expect(community.createdBy).toMatch(/^[0-9a-f]{24}$/);
    expect(community.updatedBy).toBe(community.createdBy);
    expect(response.headers['x-event-position']).toMatch(/^[0-9a-f]{32}$/);
    const stored = await t.service.store.readStream(`community-${community.id}`);
    expect(stored.map((event) => event.type)).toEqual(['CommunityCreated']);
    expect(stored[0]!.metadata).toMatchObject({ organisationId: acme.organisationId, actor: community.createdBy });

    const read = await t.request(
      'GET',
      `/api/v2/admin/communities/${community.id}`,
      asAcme({ 'x-min-position': response.headers['x-event-position'] as string }),
    );
    expect(read.status).toBe(200);
    expect(read.body).toEqual(community);
  });

  it('fills the defaults: no description, no details; a details block without images or description', async () => {
    const minimal = await t.request('POST', '/api/v2/admin/communities', { ...asAcme(), body: { name: 'Swimmers' } });
    expect(minimal.status).toBe(201);
    expect(minimal.body).toMatchObject({ name: 'Swimmers', description: null, details: {} });
    const bare = await t.request('POST', '/api/v2/admin/communities', {
      ...asAcme(),
      body: { name: 'Cyclists', details: { 'pt-BR': { title: 'Ciclistas' } } },
    });
    expect(bare.status).toBe(201);
    expect(bare.body.details).toEqual({
      'pt-BR': {
        title: 'Ciclistas',
        description: '',
        light: { primaryImageUrl: '', secondaryImageUrl: '' },
        dark: { primaryImageUrl: '', secondaryImageUrl: '' },
      },
    });
  });

  const invalid: [string, unknown, string][] = [
    ['name missing', { description: 'x' }, 'name'],
    ['name empty', { name: '' }, 'name'],
    ['name blank', { name: '   ' }, 'name'],
    ['name not a string', { name: 3 }, 'name'],
    ['description not a string', { name: 'x', description: 4 }, 'description'],
    ['details not an object', { name: 'x', details: ['en'] }, 'details'],
    ['details under a language that is no language tag', { name: 'x', details: { 'not a language': details.en } }, 'details.not a language'],
    ['details block without a title', { name: 'x', details: { en: { description: 'x' } } }, 'details.en.title'],
    ['details image that is no URL', { name: 'x', details: { en: { title: 't', light: { primaryImageUrl: 'picture' } } } }, 'details.en.light.primaryImageUrl'],
    ['an unknown field', { name: 'x', colour: 'red' }, ''],
  ];

  it.each(invalid)('POST: %s → 400 with issues, and no event appended', async (_case, body, path) => {
    const before = await t.eventCount();
    const response = await t.request('POST', '/api/v2/admin/communities', { ...asAcme(), body });
    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ code: 'BAD_REQUEST', message: 'Invalid input data' });
    expect(response.body.issues.map((issue: { path: unknown[] }) => issue.path.join('.'))).toContain(path);
    expect(await t.eventCount()).toBe(before);
  });

  it('PATCH changes only what is given: a language replaced, one removed, one added', async () => {
    const created = await t.request('POST', '/api/v2/admin/communities', {
      ...asAcme(),
      body: { ...valid, details: { ...details, nl: { ...details.en, title: 'Lopers' } } },
    });
    const fr = { ...details.en, title: 'Coureurs' };
    const patched = await t.request('PATCH', `/api/v2/admin/communities/${created.body.id}`, {
      ...asAcme(),
      body: { name: 'Joggers', details: { nl: null, fr } },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ id: created.body.id, name: 'Joggers', description: 'All runners', details: { en: details.en, fr } });
    expect(Object.keys(patched.body.details)).toEqual(['en', 'fr']);
    expect(patched.body.createdAt).toBe(created.body.createdAt);
    expect(patched.body.updatedAt >= created.body.updatedAt).toBe(true);
    const read = await t.request(
      'GET',
      `/api/v2/admin/communities/${created.body.id}`,
      asAcme({ 'x-min-position': patched.headers['x-event-position'] as string }),
    );
    expect(read.body).toEqual(patched.body);
    const cleared = await t.request('PATCH', `/api/v2/admin/communities/${created.body.id}`, { ...asAcme(), body: { description: null } });
    expect(cleared.body.description).toBeNull();
  });

  it('PATCH that changes nothing appends nothing and answers the community', async () => {
    const created = await t.request('POST', '/api/v2/admin/communities', { ...asAcme(), body: valid });
    const before = await t.eventCount();
    const same = await t.request('PATCH', `/api/v2/admin/communities/${created.body.id}`, { ...asAcme(), body: { name: 'Runners' } });
    expect(same.status).toBe(200);
    expect(same.body).toEqual(created.body);
    expect(await t.eventCount()).toBe(before);
  });

  it('PATCH validation → 400 and no event; unknown or another organisation’s community → 404', async () => {
    const created = await t.request('POST', '/api/v2/admin/communities', { ...asAcme(), body: valid });
    const before = await t.eventCount();
    for (const [body, path] of [
      [{}, ''],
      [{ name: '' }, 'name'],
      [{ details: { en: { title: '' } } }, 'details.en.title'],
      [{ organisationId: beta.organisationId }, ''],
    ] as const) {
      const response = await t.request('PATCH', `/api/v2/admin/communities/${created.body.id}`, { ...asAcme(), body });
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(response.body.issues.map((issue: { path: unknown[] }) => issue.path.join('.'))).toContain(path);
    }
    expect((await t.request('PATCH', `/api/v2/admin/communities/${created.body.id}`, { ...asBeta(), body: { name: 'Mine' } })).status).toBe(404);
    expect((await t.request('PATCH', `/api/v2/admin/communities/${'f'.repeat(24)}`, { ...asAcme(), body: { name: 'X' } })).status).toBe(404);
    expect((await t.request('PATCH', '/api/v2/admin/communities/nope', { ...asAcme(), body: { name: 'X' } })).status).toBe(404);
    expect(await t.eventCount()).toBe(before);
  });

  it('lists an organisation’s communities newest first, paginated; never another organisation’s', async () => {
    const fresh = await t.createOrganisation('pager');
    const as = { host: fresh.domain, headers: { 'x-api-token': fresh.token } };
    const ids: string[] = [];
    let position = '';
    for (let i = 0; i < 11; i++) {
      const created = await t.request('POST', '/api/v2/admin/communities', { ...as, body: { name: `C${i}` } });
      ids.push(created.body.id);
      position = created.headers['x-event-position'] as string;
    }
    const first = await t.request('GET', '/api/v2/admin/communities', { ...as, headers: { ...as.headers, 'x-min-position': position } });
    expect(first.body.totalCount).toBe(11);
    expect(first.body.edges.map((edge: { id: string }) => edge.id)).toEqual([...ids].reverse().slice(0, 10));
    const second = await t.request('GET', '/api/v2/admin/communities?limit=5&skip=10', as);
    expect(second.body.edges.map((edge: { id: string }) => edge.id)).toEqual([ids[0]]);
    for (const query of ['limit=0', 'limit=101', 'skip=-1']) {
      expect((await t.request('GET', `/api/v2/admin/communities?${query}`, as)).status, query).toBe(400);
    }
    const betaList = await t.request('GET', '/api/v2/admin/communities?limit=100', asBeta({ 'x-min-position': position }));
    expect(betaList.body).toEqual({ totalCount: 0, edges: [] });
    expect((await t.request('GET', `/api/v2/admin/communities/${ids[0]}`, asBeta())).status).toBe(404);
    expect((await t.request('GET', `/api/v2/admin/communities/${'f'.repeat(24)}`, asAcme())).body).toMatchObject({ code: 'NOT_FOUND' });
  });

  it('without a token → 401 for every route', async () => {
    for (const [method, path] of [
      ['POST', '/api/v2/admin/communities'],
      ['GET', '/api/v2/admin/communities'],
      ['GET', `/api/v2/admin/communities/${'a'.repeat(24)}`],
      ['PATCH', `/api/v2/admin/communities/${'a'.repeat(24)}`],
      ['POST', '/api/v2/admin/variable-configs'],
      ['GET', '/api/v2/admin/variable-configs'],
    ]) {
      const response = await t.request(method!, path!, { host: acme.domain, body: valid });
      expect(response.status, `${method} ${path}`).toBe(401);
      expect(response.body.code).toBe('UNAUTHORIZED');
    }
  });
});

describe('variable configs over HTTP', () => {
  let t: TestService;
  let acme: Tenant;
  let beta: Tenant;
  const asAcme = (extra: Record<string, string> = {}) => asTenant(acme, extra);
  const asBeta = (extra: Record<string, string> = {}) => asTenant(beta, extra);

  beforeAll(async () => {
    t = await startTestService();
    acme = await t.createOrganisation('acme');
    beta = await t.createOrganisation('beta');
  });
  afterAll(async () => {
    await t.close();
  });

  it('creates a variable config: 201 with every field, listed newest first', async () => {
    const response = await t.request('POST', '/api/v2/admin/variable-configs', {
      ...asAcme(),
      body: { key: 'tier', type: 'string', description: 'Loyalty tier' },
    });
    expect(response.status).toBe(201);
    const config = response.body;
    expect(Object.keys(config).sort()).toEqual(['createdAt', 'createdBy', 'description', 'id', 'key', 'organisationId', 'type']);
    expect(config.id).toMatch(/^[0-9a-f]{24}$/);
    expect(config).toMatchObject({ organisationId: acme.organisationId, key: 'tier', type: 'string', description: 'Loyalty tier' });
    expect(config.createdBy).toMatch(/^[0-9a-f]{24}$/);
    const second = await t.request('POST', '/api/v2/admin/variable-configs', { ...asAcme(), body: { key: 'score', type: 'number' } });
    expect(second.body.description).toBeNull();
    const list = await t.request('GET', '/api/v2/admin/variable-configs', asAcme({ 'x-min-position': second.headers['x-event-position'] as string }));
    expect(list.status).toBe(200);
    expect(list.body.totalCount).toBe(2);
    expect(list.body.edges).toEqual([second.body, config]);
    expect((await t.request('GET', '/api/v2/admin/variable-configs?limit=1&skip=1', asAcme())).body.edges).toEqual([config]);
    expect((await t.request('GET', '/api/v2/admin/variable-configs?limit=101', asAcme())).status).toBe(400);
  });

  it('a key already used in the organisation (in any case) → 409 and nothing appended; another organisation may use it', async () => {
    await t.request('POST', '/api/v2/admin/variable-configs', { ...asAcme(), body: { key: 'country', type: 'string' } });
    const before = await t.eventCount();
    for (const key of ['country', 'Country']) {
      const again = await t.request('POST', '/api/v2/admin/variable-configs', { ...asAcme(), body: { key, type: 'boolean' } });
      expect(again.status, key).toBe(409);
      expect(again.body.code).toBe('CONFLICT');
    }
    expect(await t.eventCount()).toBe(before);
    const elsewhere = await t.request('POST', '/api/v2/admin/variable-configs', { ...asBeta(), body: { key: 'country', type: 'string' } });
    expect(elsewhere.status).toBe(201);
    const betaList = await t.request(
      'GET',
      '/api/v2/admin/variable-configs?limit=100',
      asBeta({ 'x-min-position': elsewhere.headers['x-event-position'] as string }),
    );
    expect(betaList.body.edges.map((edge: { organisationId: string }) => edge.organisationId)).toEqual([beta.organisationId]);
  });

  it('concurrent creations of one key: exactly one wins', async () => {
    const responses = await Promise.all(
      Array.from({ length: 5 }, () => t.request('POST', '/api/v2/admin/variable-configs', { ...asAcme(), body: { key: 'race', type: 'number' } })),
    );
    expect(responses.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409]);
  });

  const invalid: [string, unknown, string][] = [
    ['key missing', { type: 'string' }, 'key'],
    ['key starting with a digit', { key: '1st', type: 'string' }, 'key'],
    ['key with a space', { key: 'loyalty tier', type: 'string' }, 'key'],
    ['key of 65 characters', { key: 'k'.repeat(65), type: 'string' }, 'key'],
    ['type missing', { key: 'a' }, 'type'],
    ['type unknown', { key: 'a', type: 'date' }, 'type'],
    ['description not a string', { key: 'a', type: 'string', description: 1 }, 'description'],
  ];

  it.each(invalid)('%s → 400 with issues, and no event appended', async (_case, body, path) => {
    const before = await t.eventCount();
    const response = await t.request('POST', '/api/v2/admin/variable-configs', { ...asAcme(), body });
    expect(response.status).toBe(400);
    expect(response.body.issues.map((issue: { path: unknown[] }) => issue.path.join('.'))).toContain(path);
    expect(await t.eventCount()).toBe(before);
  });
});
