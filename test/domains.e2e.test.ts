import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mapTxtResolver } from '../infra/dns.ts';
import { startTestService, type TestService } from './support/service.ts';

describe('domains and organisation settings', () => {
  let t: TestService;
  let acme: { organisationId: string; domain: string; token: string; tokenId: string };
  const txt = new Map<string, string[]>();
  const admin = (method: string, path: string, body?: unknown, token = acme.token, host = acme.domain) =>
    t.request(method, `/api/v2/admin${path}`, { host, headers: { 'x-api-token': token }, body });

  beforeAll(async () => {
    t = await startTestService({ jobs: false, jobOptions: { backoffMs: 0 }, outside: { resolveTxt: mapTxtResolver(txt) } });
    acme = await t.createOrganisation('acme');
  });
  afterAll(async () => {
    await t.close();
  });

  const runJobs = async () => {
    await t.settle();
    await t.service.jobs.runDue();
    await t.settle();
  };

  it('lists the standard domain, active', async () => {
    const response = await admin('GET', '/domains');
    expect(response.status).toBe(200);
    expect(response.body.totalCount).toBe(1);
    expect(response.body.edges[0]).toMatchObject({ hostname: 'acme.engage.test', kind: 'standard', status: 'active', verification: null, failureReason: null });
  });

  it('registers a white-label domain: pending, then active once its TXT record is found; tokens then work on it', async () => {
    const response = await admin('POST', '/domains', { hostname: 'Rewards.Acme-Shop.com', kind: 'white-label' });
    expect(response.status).toBe(201);
    expect(response.body).toEqual({
      hostname: 'rewards.acme-shop.com',
      kind: 'white-label',
      status: 'pending',
      verification: { type: 'TXT', name: '_engage-verification.rewards.acme-shop.com', value: expect.stringMatching(/^engage-verification=[0-9a-f]{32}$/) },
      createdAt: expect.any(String),
    });
    txt.set('_engage-verification.rewards.acme-shop.com', ['unrelated', response.body.verification.value]);
    await runJobs();
    const listed = (await admin('GET', '/domains')).body.edges.find((d: { hostname: string }) => d.hostname === 'rewards.acme-shop.com');
    expect(listed).toMatchObject({ status: 'active', failureReason: null, verification: response.body.verification });
    const issued = await t.issueToken({ organisationId: acme.organisationId, name: 'shop', domain: 'rewards.acme-shop.com', families: ['admin'] });
    expect((await admin('GET', '/settings', undefined, issued.token, 'rewards.acme-shop.com')).body.organisationId).toBe(acme.organisationId);
    expect((await admin('GET', '/settings', undefined, issued.token)).status).toBe(401);
  });

  it('fails a white-label domain whose TXT record never appears, with the reason', async () => {
    const response = await admin('POST', '/domains', { hostname: 'never.example.org', kind: 'white-label' });
    expect(response.status).toBe(201);
    await runJobs();
    const listed = (await admin('GET', '/domains')).body.edges.find((d: { hostname: string }) => d.hostname === 'never.example.org');
    expect(listed.status).toBe('failed');
    expect(listed.failureReason).toMatch(/no TXT record .* at _engage-verification\.never\.example\.org after 5 attempts/);
    await expect(t.issueToken({ organisationId: acme.organisationId, name: 'x', domain: 'never.example.org', families: ['admin'] })).rejects.toThrow(
      /failed, not active/,
    );
  });

  it('a custom subdomain is verified at once and needs no DNS', async () => {
    const response = await admin('POST', '/domains', { hostname: 'rewards.engage.test', kind: 'custom-subdomain' });
    expect(response.status).toBe(201);
    expect(response.body.status).toBe('verified');
    await runJobs();
    const listed = (await admin('GET', '/domains')).body.edges.find((d: { hostname: string }) => d.hostname === 'rewards.engage.test');
    expect(listed.status).toBe('active');
  });

  it('refuses invalid bodies with 400 and appends nothing; a taken hostname → 409', async () => {
    await t.settle();
    const before = await t.eventCount();
    for (const body of [
      {},
      { hostname: 'x.example.com' },
      { hostname: 'not a host', kind: 'white-label' },
      { hostname: 'x.example.com', kind: 'standard' },
      { hostname: 'a.b.engage.test', kind: 'custom-subdomain' },
      { hostname: 'shop.example.com', kind: 'custom-subdomain' },
      { hostname: 'other.engage.test', kind: 'white-label' },
      { hostname: '127.0.0.1', kind: 'white-label' },
      { hostname: 'shop.123', kind: 'white-label' },
    ]) {
      const response = await admin('POST', '/domains', body);
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(response.body.code).toBe('BAD_REQUEST');
    }
    expect(await t.eventCount()).toBe(before);
    const beta = await t.createOrganisation('beta');
    const taken = await t.request('POST', '/api/v2/admin/domains', {
      host: beta.domain,
      headers: { 'x-api-token': beta.token },
      body: { hostname: 'rewards.acme-shop.com', kind: 'white-label' },
    });
    expect(taken.status).toBe(409);
    expect((await admin('POST', '/domains', { hostname: 'acme.engage.test', kind: 'custom-subdomain' })).status).toBe(409);
    expect((await admin('POST', '/domains', { hostname: 'x.example.com', kind: 'white-label' }, 'eng_00000000_nope')).status).toBe(401);
  });

  it('removing a domain revokes its tokens at once and frees the hostname; the standard domain stays (409); unknown → 404', async () => {
    const issued = await t.issueToken({ organisationId: acme.organisationId, name: 'shop2', domain: 'rewards.acme-shop.com', families: ['admin'] });
    expect((await admin('GET', '/domains', undefined, issued.token, 'rewards.acme-shop.com')).status).toBe(200);
    const removed = await admin('POST', '/domains/remove', { hostname: 'rewards.acme-shop.com' });
    expect(removed.status).toBe(200);
    expect(removed.body.hostname).toBe('rewards.acme-shop.com');
    expect(removed.body.removed).toBe(true);
    expect(removed.body.revokedTokenIds).toContain(issued.tokenId);
    expect((await admin('GET', '/domains', undefined, issued.token, 'rewards.acme-shop.com')).status).toBe(401);
    expect((await admin('GET', '/domains')).body.edges.map((d: { hostname: string }) => d.hostname)).not.toContain('rewards.acme-shop.com');
    expect((await admin('POST', '/domains/remove', { hostname: 'acme.engage.test' })).status).toBe(409);
    expect((await admin('POST', '/domains/remove', { hostname: 'nobody.example.com' })).status).toBe(404);
    expect((await admin('POST', '/domains/remove', {})).status).toBe(400);
    expect((await admin('POST', '/domains', { hostname: 'rewards.acme-shop.com', kind: 'white-label' })).status).toBe(201);
  });

  it('reads and changes the settings', async () => {
    const read = await admin('GET', '/settings');
    expect(read.status).toBe(200);
    expect(read.body).toEqual({
      organisationId: acme.organisationId,
      name: 'Organisation acme',
      slug: 'acme',
      domain: 'acme.engage.test',
      defaultLanguage: 'en',
      timezone: 'UTC',
      rateLimits: { windowSeconds: 60, apiTokenRequests: 1_000_000, userTokenRequests: 1_000_000 },
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    const changed = await admin('PATCH', '/settings', { timezone: 'Europe/Brussels', defaultLanguage: 'nl-be', name: ' Acme NV ' });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({ name: 'Acme NV', timezone: 'Europe/Brussels', defaultLanguage: 'nl-BE' });
    const row = await t.service.database.db.selectFrom('organisations').selectAll().where('id', '=', acme.organisationId).executeTakeFirstOrThrow();
    expect([row.timezone, row.default_language]).toEqual(['Europe/Brussels', 'nl-BE']);
    await t.settle();
    const before = await t.eventCount();
    for (const body of [{}, { timezone: 'Mars/Olympus' }, { timezone: '+01:00' }, { defaultLanguage: 'english!' }, { name: '' }, { colour: 'red' }]) {
      const response = await admin('PATCH', '/settings', body);
      expect(response.status, JSON.stringify(body)).toBe(400);
    }
    expect(await t.eventCount()).toBe(before);
  });
});
