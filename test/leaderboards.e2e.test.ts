import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, asTenant, type Tenant } from './support/service.ts';

const valid = {
  name: 'Weekly XP',
  description: 'Most XP this week',
  metricType: 'total-xp',
  startsAt: '2026-01-05T00:00:00Z',
  expiresAt: '2026-03-30T00:00:00+02:00',
  status: 'scheduled',
  period: 'weekly',
  conditions: [
    { type: 'community', communityId: 'aaaaaaaaaaaaaaaaaaaaaaaa' },
    { type: 'variable-config', variableConfigId: 'BBBBBBBBBBBBBBBBBBBBBBBB', value: 3 },
  ],
};

describe('leaderboards over HTTP', () => {
  let t: TestService;
  let acme: Tenant;
  let beta: Tenant;
  const asAcme = (extra: Record<string, string> = {}) => asTenant(acme, extra);

  beforeAll(async () => {
    // No timed work: leaderboards starting in the past would change status and close windows while these tests count events.
    t = await startTestService({ jobs: false });
    acme = await t.createOrganisation('acme');
    beta = await t.createOrganisation('beta');
  });
  afterAll(async () => {
    await t.close();
  });

  it('creates a leaderboard: 200 with the full config, and the position it wrote', async () => {
    const response = await t.request('POST', '/api/v2/admin/leaderboards', { ...asAcme(), body: valid });
    expect(response.status).toBe(200);
    const config = response.body;
    expect(Object.keys(config).sort()).toEqual(
      [
        'conditions',
        'createdAt',
        'createdBy',
        'description',
        'expiresAt',
        'id',
        'metricType',
        'name',
        'organisationId',
        'period',
        'rewardsConfig',
        'startsAt',
        'status',
        'updatedAt',
        'updatedBy',
      ].sort(),
    );
    expect(config.id).toMatch(/^[0-9a-f]{24}$/);
    expect(config.organisationId).toBe(acme.organisationId);
    expect(config.name).toBe('Weekly XP');
    expect(config.description).toBe('Most XP this week');
    expect(config.metricType).toBe('total-xp');
    expect(config.period).toBe('weekly');
    expect(config.startsAt).toBe('2026-01-05T00:00:00.000Z');
    expect(config.expiresAt).toBe('2026-03-29T22:00:00.000Z');
    expect(config.status).toBe('scheduled');
    expect(config.conditions).toEqual(valid.conditions);
    expect(config.rewardsConfig).toEqual([]);
    expect(config.createdAt).toBe(config.updatedAt);
    expect(Number.isNaN(Date.parse(config.createdAt))).toBe(false);
    expect(config.createdBy).toMatch(/^[0-9a-f]{24}$/);
    expect(config.updatedBy).toBe(config.createdBy);
    expect(response.headers['x-event-position']).toMatch(/^[0-9a-f]{32}$/);
    expect(response.headers['x-request-id']).toBeTruthy();

    const stored = await t.service.store.readStream(`leaderboard-${config.id}`);
    expect(stored.map((event) => event.type)).toEqual(['LeaderboardCreated']);
    expect(stored[0]!.metadata).toMatchObject({ organisationId: acme.organisationId, actor: config.createdBy, causationId: response.headers['x-request-id'] });

    const read = await t.request(
      'GET',
      `/api/v2/admin/leaderboards/${config.id}`,
      asAcme({ 'x-min-position': response.headers['x-event-position'] as string }),
    );
    expect(read.status).toBe(200);
    expect(read.body).toEqual(config);
  });

  it('applies the defaults: no description, no expiry, no conditions', async () => {
    const { description: _d, expiresAt: _e, conditions: _c, ...minimal } = valid;
    const response = await t.request('POST', '/api/v2/admin/leaderboards', { ...asAcme(), body: { ...minimal, status: 'draft' } });
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ description: null, expiresAt: null, conditions: [], status: 'draft' });
  });

  it('accepts every status, metric type and period the contract lists (where the metric can vary)', async () => {
    for (const status of ['archived', 'draft', 'expired', 'live', 'scheduled']) {
      const response = await t.request('POST', '/api/v2/admin/leaderboards', { ...asAcme(), body: { ...valid, status } });
      expect(response.status, status).toBe(200);
    }
    for (const metricType of [
      'consistent-weeks',
      'qualifying-active-days',
      'total-actions-completed',
      'total-challenges-completed',
      'total-challenges-started',
      'total-xp',
      'unique-challenges-completed',
    ]) {
      const response = await t.request('POST', '/api/v2/admin/leaderboards', { ...asAcme(), body: { ...valid, metricType, period: 'monthly' } });
      expect(response.status, metricType).toBe(200);
    }
    for (const period of ['daily', 'weekly', 'monthly', 'yearly', 'open']) {
      const response = await t.request('POST', '/api/v2/admin/leaderboards', { ...asAcme(), body: { ...valid, period } });
      expect(response.status, period).toBe(200);
    }
  });

  const invalid: [string, unknown, string][] = [
    ['name missing', { ...valid, name: undefined }, 'name'],
    ['name empty', { ...valid, name: '' }, 'name'],
    ['name not a string', { ...valid, name: 7 }, 'name'],
    ['description not a string', { ...valid, description: 5 }, 'description'],
    ['metricType missing', { ...valid, metricType: undefined }, 'metricType'],
    ['metricType unknown', { ...valid, metricType: 'most-logins' }, 'metricType'],
    ['period missing', { ...valid, period: undefined }, 'period'],
    ['period unknown', { ...valid, period: 'hourly' }, 'period'],
    ['status missing', { ...valid, status: undefined }, 'status'],
    ['status unknown', { ...valid, status: 'paused' }, 'status'],
    ['startsAt missing', { ...valid, startsAt: undefined }, 'startsAt'],
    ['startsAt not a date', { ...valid, startsAt: 'next monday' }, 'startsAt'],
    ['expiresAt not a date', { ...valid, expiresAt: '31/12/2026' }, 'expiresAt'],
    ['expiresAt before startsAt', { ...valid, expiresAt: '2026-01-01T00:00:00Z' }, 'expiresAt'],
    ['conditions not an array', { ...valid, conditions: { type: 'community' } }, 'conditions'],
    ['condition of unknown type', { ...valid, conditions: [{ type: 'country', value: 'NL' }] }, 'conditions.0.type'],
    ['community condition without communityId', { ...valid, conditions: [{ type: 'community' }] }, 'conditions.0.communityId'],
    ['communityId not 24 hex', { ...valid, conditions: [{ type: 'community', communityId: 'xyz' }] }, 'conditions.0.communityId'],
    ['communityId of 25 hex', { ...valid, conditions: [{ type: 'community', communityId: 'a'.repeat(25) }] }, 'conditions.0.communityId'],
    [
      'variableConfigId not 24 hex',
      { ...valid, conditions: [{ type: 'variable-config', variableConfigId: '123', value: 'gold' }] },
      'conditions.0.variableConfigId',
    ],
    ['variable-config without value', { ...valid, conditions: [{ type: 'variable-config', variableConfigId: 'a'.repeat(24) }] }, 'conditions.0.value'],
    [
      'variable-config value an object',
      { ...valid, conditions: [{ type: 'variable-config', variableConfigId: 'a'.repeat(24), value: { tier: 1 } }] },
      'conditions.0.value',
    ],
    ['consistent-weeks with a daily period', { ...valid, metricType: 'consistent-weeks', period: 'daily' }, 'metricType'],
    ['consistent-weeks with a weekly period', { ...valid, metricType: 'consistent-weeks', period: 'weekly' }, 'metricType'],
    ['qualifying-active-days with a daily period', { ...valid, metricType: 'qualifying-active-days', period: 'daily' }, 'metricType'],
    ['a body that is not an object', ['name'], ''],
  ];

  it.each(invalid)('%s → 400 with issues, and no event appended', async (_case, body, path) => {
    const before = await t.eventCount();
    const response = await t.request('POST', '/api/v2/admin/leaderboards', { ...asAcme(), body });
    expect(response.status).toBe(400);
    expect(response.body.code).toBe('BAD_REQUEST');
    expect(response.body.message).toBe('Invalid input data');
    expect(response.body.issues.length).toBeGreaterThan(0);
    expect(response.body.issues.map((issue: { path: unknown[] }) => issue.path.join('.'))).toContain(path);
    expect(await t.eventCount()).toBe(before);
  });

  it('malformed JSON → 400; a body over the limit → 413; neither appends', async () => {
    const before = await t.eventCount();
    const malformed = await t.request('POST', '/api/v2/admin/leaderboards', { ...asAcme(), rawBody: '{"name": ' });
    expect(malformed.status).toBe(400);
    expect(malformed.body).toMatchObject({ code: 'BAD_REQUEST' });
    const huge = await t.request('POST', '/api/v2/admin/leaderboards', { ...asAcme(), body: { ...valid, description: 'x'.repeat(200_000) } });
    expect(huge.status).toBe(413);
    expect(huge.body).toEqual({ message: 'Request body is too large', code: 'PAYLOAD_TOO_LARGE' });
    expect(await t.eventCount()).toBe(before);
  });

  it('lists an organisation’s leaderboards newest first, paginated with limit and skip', async () => {
    const fresh = await t.createOrganisation('pager');
    const as = { host: fresh.domain, headers: { 'x-api-token': fresh.token } };
    const ids: string[] = [];
    let position = '';
    for (let i = 0; i < 12; i++) {
      const created = await t.request('POST', '/api/v2/admin/leaderboards', { ...as, body: { ...valid, name: `Board ${i}` } });
      ids.push(created.body.id);
      position = created.headers['x-event-position'] as string;
    }
    const first = await t.request('GET', '/api/v2/admin/leaderboards', { ...as, headers: { ...as.headers, 'x-min-position': position } });
    expect(first.status).toBe(200);
    expect(first.body.totalCount).toBe(12);
    expect(first.body.edges).toHaveLength(10);
    expect(first.body.edges.map((edge: { id: string }) => edge.id)).toEqual([...ids].reverse().slice(0, 10));
    const second = await t.request('GET', '/api/v2/admin/leaderboards?limit=5&skip=10', as);
    expect(second.body).toMatchObject({ totalCount: 12 });
    expect(second.body.edges.map((edge: { id: string }) => edge.id)).toEqual([ids[1], ids[0]]);
    const beyond = await t.request('GET', '/api/v2/admin/leaderboards?skip=50', as);
    expect(beyond.body).toEqual({ totalCount: 12, edges: [] });
    for (const query of ['limit=0', 'limit=101', 'limit=abc', 'skip=-1', 'limit=2.5']) {
      const response = await t.request('GET', `/api/v2/admin/leaderboards?${query}`, as);
      expect(response.status, query).toBe(400);
      expect(response.body.code).toBe('BAD_REQUEST');
    }
    expect((await t.request('GET', '/api/v2/admin/leaderboards?limit=100', as)).status).toBe(200);
    expect((await t.request('GET', '/api/v2/admin/leaderboards?limit=1', as)).body.edges).toHaveLength(1);
  });

  it('never shows one organisation another’s leaderboards', async () => {
    const created = await t.request('POST', '/api/v2/admin/leaderboards', { ...asAcme(), body: valid });
    const position = created.headers['x-event-position'] as string;
    const asBeta = { host: beta.domain, headers: { 'x-api-token': beta.token, 'x-min-position': position } };
    expect((await t.request('GET', `/api/v2/admin/leaderboards/${created.body.id}`, asBeta)).status).toBe(404);
    const list = await t.request('GET', '/api/v2/admin/leaderboards?limit=100', asBeta);
    expect(list.body.edges.map((edge: { organisationId: string }) => edge.organisationId)).not.toContain(acme.organisationId);
  });

  it('an unknown leaderboard → 404 with the error body; a bad x-min-position → 400', async () => {
    const missing = await t.request('GET', `/api/v2/admin/leaderboards/${'f'.repeat(24)}`, asAcme());
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ code: 'NOT_FOUND' });
    const bad = await t.request('GET', '/api/v2/admin/leaderboards', asAcme({ 'x-min-position': 'yesterday' }));
    expect(bad.status).toBe(400);
  });

  it('Idempotency-Key: a retry gets the first answer and appends nothing; a different body under the key is a 409', async () => {
    const headers = { 'idempotency-key': 'create-weekly-1' };
    const first = await t.request('POST', '/api/v2/admin/leaderboards', { ...asAcme(headers), body: valid });
    expect(first.status).toBe(200);
    const before = await t.eventCount();
    const again = await t.request('POST', '/api/v2/admin/leaderboards', { ...asAcme(headers), body: valid });
    expect(again.status).toBe(200);
    // The first answer again, byte for byte.
    expect(again.text).toBe(first.text);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(await t.eventCount()).toBe(before);
    const different = await t.request('POST', '/api/v2/admin/leaderboards', { ...asAcme(headers), body: { ...valid, name: 'Other' } });
    expect(different.status).toBe(409);
    expect(different.body.code).toBe('CONFLICT');
    const tooLong = await t.request('POST', '/api/v2/admin/leaderboards', { ...asAcme({ 'idempotency-key': 'k'.repeat(256) }), body: valid });
    expect(tooLong.status).toBe(400);
  });

  it('Idempotency-Key: a retry on the same route spelled otherwise, or with the fields in another order, is the same request', async () => {
    const headers = { 'idempotency-key': 'create-weekly-spelled' };
    const first = await t.request('POST', '/api/v2/admin/leaderboards', { ...asAcme(headers), body: valid });
    expect(first.status).toBe(200);
    const before = await t.eventCount();
    const reordered = Object.fromEntries(Object.entries(valid).reverse());
    for (const path of ['/api/v2/admin/Leaderboards', '/api/v2/admin/leaderboards/', '/API/v2/admin/LEADERBOARDS/']) {
      const again = await t.request('POST', path, { ...asAcme(headers), body: reordered });
      expect({ path, status: again.status, id: again.body.id, replayed: again.headers['idempotent-replayed'] }).toEqual({
        path,
        status: 200,
        id: first.body.id,
        replayed: 'true',
      });
    }
    expect(await t.eventCount()).toBe(before);
  });

  it('Idempotency-Key: concurrent retries create exactly one leaderboard', async () => {
    const fresh = await t.createOrganisation('retries');
    const as = { host: fresh.domain, headers: { 'x-api-token': fresh.token, 'idempotency-key': 'same-request' } };
    const responses = await Promise.all(Array.from({ length: 10 }, () => t.request('POST', '/api/v2/admin/leaderboards', { ...as, body: valid })));
    expect(responses.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(new Set(responses.map((r) => r.body.id)).size).toBe(1);
    const position = responses
      .map((r) => r.headers['x-event-position'] as string)
      .sort()
      .at(-1)!;
    const list = await t.request('GET', '/api/v2/admin/leaderboards', {
      host: fresh.domain,
      headers: { 'x-api-token': fresh.token, 'x-min-position': position },
    });
    expect(list.body.totalCount).toBe(1);
  });

  it('describes the admin API as OpenAPI 3.1 from the same schemas, with a docs page, without credentials', async () => {
    const response = await t.request('GET', '/api/v2/admin/openapi.json', { host: acme.domain });
    expect(response.status).toBe(200);
    const document = response.body;
    expect(document.openapi).toBe('3.1.0');
    expect(document.info.version).toBe('1.0.0');
    expect(document.components.securitySchemes.apiToken).toEqual(expect.objectContaining({ type: 'apiKey', in: 'header', name: 'x-api-token' }));
    // Other slices add their own paths to the same document; these are the leaderboard slice's.
    expect(
      Object.keys(document.paths)
        .filter((path) => path.startsWith('/leaderboards'))
        .sort(),
    ).toEqual(['/leaderboards', '/leaderboards/{leaderboardConfigId}', '/leaderboards/{leaderboardConfigId}/distribution']);
    expect(Object.keys(document.paths['/leaderboards/{leaderboardConfigId}']).sort()).toEqual(['get', 'patch']);
    expect(Object.keys(document.paths['/leaderboards/{leaderboardConfigId}/distribution']).sort()).toEqual(['get', 'post']);
    expect(document.paths['/leaderboards/{leaderboardConfigId}'].patch.requestBody.content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/UpdateLeaderboard',
    });
    expect(document.paths['/leaderboards/{leaderboardConfigId}/distribution'].post.requestBody.content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/AssignLeaderboardRewards',
    });
    expect(document.components.schemas.AssignLeaderboardRewards.required).toEqual(['rewards']);
    const rankRange = document.components.schemas.LeaderboardRankDistributionInput;
    expect(rankRange.properties.startRank).toMatchObject({ type: 'integer', minimum: 1 });
    expect(rankRange.properties.endRank).toMatchObject({ type: 'integer', minimum: 1 });
    expect(Object.keys(document.paths['/leaderboards/{leaderboardConfigId}'].patch.responses).sort()).toEqual([
      '200',
      '400',
      '401',
      '403',
      '404',
      '409',
      '413',
      '415',
      '429',
      '500',
    ]);
    expect(document.paths['/leaderboards'].post.requestBody.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/CreateLeaderboard' });
    const create = document.components.schemas.CreateLeaderboard;
    expect(create.required.sort()).toEqual(['metricType', 'name', 'period', 'startsAt', 'status']);
    expect(create.properties.metricType.enum).toHaveLength(7);
    expect(document.paths['/leaderboards'].get.parameters.map((p: { name: string }) => p.name)).toEqual(['limit', 'skip', 'x-min-position']);
    const docs = await t.request('GET', '/api/v2/admin/docs', { host: acme.domain });
    expect(docs.status).toBe(200);
    expect(docs.text).toContain('/api/v2/admin/openapi.json');
  });
});
