import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type Tenant } from './support/service.ts';

describe('tenancy and API tokens', () => {
  let t: TestService;
  let acme: { organisationId: string; domain: string; token: string; tokenId: string };
  let beta: Tenant;

  beforeAll(async () => {
    t = await startTestService();
    acme = await t.createOrganisation('acme');
    beta = await t.createOrganisation('beta');
  });
  afterAll(async () => {
    await t.close();
  });

  const list = (host: string, headers: Record<string, string> = {}) => t.request('GET', '/api/v2/admin/leaderboards', { host, headers });

  it('gives each organisation its standard subdomain, and the Host header picks the organisation', async () => {
    expect(acme.domain).toBe('acme.engage.test');
    expect(acme.token).toMatch(/^eng_[0-9a-f]{8}_[A-Za-z0-9_-]{43}$/);
    expect((await list(acme.domain, { 'x-api-token': acme.token })).status).toBe(200);
    expect((await list(`${acme.domain}:8080`, { 'x-api-token': acme.token })).status).toBe(200);
    expect((await list(acme.domain.toUpperCase(), { 'x-api-token': `Bearer ${acme.token}` })).status).toBe(200);
  });

  it('no token, an unknown token, or a token sent to another organisation’s domain → 401 UNAUTHORIZED', async () => {
    for (const [host, headers] of [
      [acme.domain, {}],
      [acme.domain, { 'x-api-token': 'eng_00000000_not-a-real-token' }],
      [beta.domain, { 'x-api-token': acme.token }],
      ['nobody.engage.test', { 'x-api-token': acme.token }],
      ['localhost', { 'x-api-token': acme.token }],
    ] as const) {
      const response = await list(host, headers);
      expect(response.status, `${host} ${JSON.stringify(headers)}`).toBe(401);
      expect(response.body.code).toBe('UNAUTHORIZED');
      expect(typeof response.body.message).toBe('string');
    }
  });

  it('stores only a hash of each token', async () => {
    const row = await t.service.database.db.selectFrom('api_tokens').selectAll().where('id', '=', acme.tokenId).executeTakeFirstOrThrow();
    expect(row.secret_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.stringify(row)).not.toContain(acme.token);
    const events = await t.service.store.readStream(`organisation-${acme.organisationId}`);
    expect(JSON.stringify(events, (_key, value) => (typeof value === 'bigint' ? value.toString() : value))).not.toContain(acme.token);
  });

  it('a token without the API family → 403 FORBIDDEN; with it → through', async () => {
    const integrationOnly = await t.issueToken({ organisationId: acme.organisationId, name: 'app', families: ['integration'] });
    const response = await list(acme.domain, { 'x-api-token': integrationOnly.token });
    expect(response.status).toBe(403);
    expect(response.body).toMatchObject({ code: 'FORBIDDEN' });
    const integration = await t.request('GET', '/api/v2/integration/nothing-here', { host: acme.domain, headers: { 'x-api-token': integrationOnly.token } });
    expect(integration.status).toBe(404);
    const analytics = await t.request('GET', '/api/v2/analytics/nothing-here', { host: acme.domain });
    expect(analytics.status).toBe(401);
  });

  it('a revoked token gets 401 on the very next request', async () => {
    const issued = await t.issueToken({ organisationId: beta.organisationId, name: 'short-lived', families: ['admin'] });
    expect((await list(beta.domain, { 'x-api-token': issued.token })).status).toBe(200);
    await t.revokeToken(issued.tokenId);
    expect((await list(beta.domain, { 'x-api-token': issued.token })).status).toBe(401);
    expect((await list(beta.domain, { 'x-api-token': beta.token })).status).toBe(200);
  });

  it('refuses a second organisation with the same slug, and tokens for foreign domains', async () => {
    await expect(t.createOrganisation('acme')).rejects.toThrow(/already in use/);
    await expect(t.issueToken({ organisationId: acme.organisationId, name: 'x', domain: beta.domain, families: ['admin'] })).rejects.toThrow(
      /not one of this organisation/,
    );
  });

  it('answers /healthz and /readyz without credentials', async () => {
    expect((await t.request('GET', '/healthz')).body).toEqual({ status: 'ok' });
    const ready = await t.request('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body.status).toBe('ready');
    expect(Object.values(ready.body.checks).every((check) => check === 'ok')).toBe(true);
    if (process.env.TEST_REDIS_URL) expect(ready.body.checks.redis).toBe('ok');
  });

  it('an unknown route → 404 in the error body, the former console endpoint included', async () => {
    const response = await t.request('GET', '/api/v2/admin/nothing-here', { host: acme.domain, headers: { 'x-api-token': acme.token } });
    expect(response.status).toBe(404);
    expect(response.body).toEqual({ message: 'No route for GET /api/v2/admin/nothing-here', code: 'NOT_FOUND' });
    expect((await t.request('GET', '/', {})).status).toBe(404);
    const console = await t.request('POST', '/_console/organisation.create', { body: { name: 'x', slug: 'sneaky' } });
    expect(console.status).toBe(404);
    expect(console.body.code).toBe('NOT_FOUND');
  });
});
