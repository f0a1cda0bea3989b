import type { Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../infra/config.ts';
import { TENANCY_CHANNEL } from '../infra/tenancy-channel.ts';
import { openService, type Service } from '../service.ts';
import { httpClient } from './support/http.ts';
import { PLATFORM_DOMAIN, startTestService, type TestService } from './support/service.ts';

/**
 * API tokens are authenticated from an in-process cache (infra/auth.ts). Two composed services on one
 * database: a token revoked through one is refused by the other on the very next request, whether the cache
 * had it or not, and whether the other's LISTEN connection is up or was just cut.
 */
describe('token cache across processes', () => {
  let a: TestService;
  let b: Service;
  let bListener: Server;
  let bRequest: ReturnType<typeof httpClient>;
  let dataDir: string;
  let organisationId: string;
  let domain: string;

  beforeAll(async () => {
    a = await startTestService();
    dataDir = mkdtempSync(join(tmpdir(), 'engage-test-b-'));
    const config = loadConfig({
      DATA_DIR: dataDir,
      PLATFORM_DOMAIN,
      LOG_LEVEL: 'silent',
      DATABASE_URL: a.service.config.databaseUrl!,
      APPLICATION_NAME: 'engage-token-cache-b',
      DATABASE_POOL_SIZE: '3',
      RATE_LIMIT_API_TOKEN_REQUESTS: '1000000',
      RATE_LIMIT_FAILED_AUTHENTICATIONS: '1000000',
    });
    b = await openService(config, pino({ level: 'silent' }), { projectors: false, jobs: false });
    bListener = b.app.listen(0, '127.0.0.1');
    await new Promise((resolve) => bListener.once('listening', resolve));
    bRequest = httpClient(bListener);
    const created = await a.createOrganisation(`cache${Date.now().toString(36)}`);
    organisationId = created.organisationId;
    domain = created.domain;
  });
  afterAll(async () => {
    await new Promise((resolve) => bListener.close(resolve));
    await b.close();
    await a.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** Announces the tenancy counter's current value, as the organisations read model does with each change it commits. */
  const announceTenancy = () => sql`select pg_notify(${TENANCY_CHANNEL}, version::text) from public.tenancy_version`.execute(a.service.database.db);
  const asToken = (token: string) => ({ host: domain, headers: { 'x-api-token': token } });
  const tokenReads = async () => (await b.metrics.databaseStatements.get()).values.find((value) => value.labels.purpose === 'auth')?.value ?? 0;
  /** B's LISTEN connection is in place and has read the tenancy counter: requests may be answered from its cache. */
  const bCaches = async (token: string) => {
    for (let attempt = 0; attempt < 200; attempt++) {
      await bRequest('GET', '/api/v2/admin/leaderboards', asToken(token));
      const before = await tokenReads();
      const answer = await bRequest('GET', '/api/v2/admin/leaderboards', asToken(token));
      expect(answer.status).toBe(200);
      if ((await tokenReads()) === before) return;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    throw new Error('process B never answered from its token cache');
  };

  it('a revoked token is refused by the other process on the very next request, cached or not', async () => {
    for (let round = 0; round < 5; round++) {
      const { token, tokenId } = await a.issueToken({ organisationId, name: `round ${round}`, families: ['admin'] });
      await bCaches(token);
      expect((await a.request('GET', '/api/v2/admin/leaderboards', asToken(token))).status).toBe(200);
      await a.revokeToken(tokenId);
      const onB = await bRequest('GET', '/api/v2/admin/leaderboards', asToken(token));
      expect(onB.status).toBe(401);
      expect(onB.body).toMatchObject({ code: 'UNAUTHORIZED' });
      expect((await a.request('GET', '/api/v2/admin/leaderboards', asToken(token))).status).toBe(401);
    }
  });

  it('with its LISTEN connection cut, the other process serves nothing stale', async () => {
    const { token, tokenId } = await a.issueToken({ organisationId, name: 'cut', families: ['admin'] });
    await bCaches(token);
    await sql`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'engage-token-cache-b:listen'`.execute(a.service.database.db);
    await a.revokeToken(tokenId);
    expect((await bRequest('GET', '/api/v2/admin/leaderboards', asToken(token))).status).toBe(401);
    // It listens again by itself, and caches again.
    const fresh = await a.issueToken({ organisationId, name: 'after the cut', families: ['admin'] });
    await bCaches(fresh.token);
    await a.revokeToken(fresh.tokenId);
    expect((await bRequest('GET', '/api/v2/admin/leaderboards', asToken(fresh.token))).status).toBe(401);
  });

  it('keeps the connection budget: one LISTEN connection per process, shared by the store and the token cache', async () => {
    const { token } = await a.issueToken({ organisationId, name: 'budget', families: ['admin'] });
    await bCaches(token);
    b.store.appendVersion(); // the store listens for wake-ups too
    const listening = async () =>
      Number(
        (
          await sql<{ count: string }>`select count(*) as count from pg_stat_activity where application_name = 'engage-token-cache-b:listen'`.execute(
            a.service.database.db,
          )
        ).rows[0]!.count,
      );
    for (let attempt = 0; attempt < 20; attempt++) {
      expect(await listening()).toBe(1);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  });
  it("proves a custom event's cached token in the event's own append: no counter read, and a revocation not heard of yet still refuses it", async () => {
    const { token, tokenId } = await a.issueToken({ organisationId, name: 'checked by append', families: ['admin'] });
    const community = await a.request('POST', '/api/v2/admin/communities', { ...asToken(token), body: { name: 'Checked by append' } });
    expect(community.status).toBe(201);
    await bCaches(token);
    let counterReads = 0;
    b.database.observeStatements((purpose) => {
      if (purpose === 'auth-version') counterReads++;
    });
    const run = Date.now().toString(36);
    const logOnB = (nonce: string) =>
      bRequest('POST', '/api/v2/admin/events/custom', {
        ...asToken(token),
        body: { eventName: 'visit', userId: `append-${run}`, communityId: community.body.id, autoCreateUser: true, payload: {}, nonce: `${run}-${nonce}` },
      });
    const logged = async () =>
      (
        await sql<{ nonce: string }>`select data ->> 'nonce' as nonce from es_events
          where event_type = 'CustomEventLogged' and data ->> 'nonce' like ${`${run}-%`} order by global_position`.execute(a.service.database.db)
      ).rows.map((row) => row.nonce);

    for (const nonce of ['one', 'two', 'three']) expect((await logOnB(nonce)).status).toBe(200);
    expect(counterReads).toBe(0);

    // A change of the organisations' tenancy committed but not announced yet (as between its commit and the
    // delivery of its NOTIFY): the append refuses, the token is judged again from the database, and the event
    // is logged, once.
    await sql`update public.tenancy_version set version = version + 1`.execute(a.service.database.db);
    expect((await logOnB('four')).status).toBe(200);
    expect(counterReads).toBeGreaterThan(0);

    // A revocation B has not heard of either: refused all the same, and nothing logged.
    await a.service.database.db.transaction().execute(async (trx) => {
      await sql`update public.api_tokens set revoked_at = now() where id = ${tokenId}`.execute(trx);
      await sql`update public.tenancy_version set version = version + 1`.execute(trx);
    });
    const refused = await logOnB('five');
    expect(refused.status).toBe(401);
    expect(refused.body).toMatchObject({ code: 'UNAUTHORIZED' });
    expect(await logged()).toEqual(['one', 'two', 'three', 'four'].map((nonce) => `${run}-${nonce}`));

    // B hears of the counter's value now (as the changes' own announcements would have told it), and caches again.
    await announceTenancy();
    // The batch route likewise, with a token revoked that B has not heard of.
    const other = await a.issueToken({ organisationId, name: 'checked by append, batch', families: ['admin'] });
    await bCaches(other.token);
    const batchOnB = (nonce: string) =>
      bRequest('POST', '/api/v2/admin/events/custom/batch', {
        ...asToken(other.token),
        body: [{ eventName: 'visit', userId: `append-${run}`, communityId: community.body.id, payload: {}, nonce: `${run}-${nonce}` }],
      });
    const reads = counterReads;
    const batched = await batchOnB('six');
    expect(batched.status).toBe(200);
    expect(batched.body).toMatchObject([{ status: 200 }]);
    expect(counterReads).toBe(reads);
    await a.service.database.db.transaction().execute(async (trx) => {
      await sql`update public.api_tokens set revoked_at = now() where id = ${other.tokenId}`.execute(trx);
      await sql`update public.tenancy_version set version = version + 1`.execute(trx);
    });
    expect((await batchOnB('seven')).status).toBe(401);
    expect(await logged()).toEqual(['one', 'two', 'three', 'four', 'six'].map((nonce) => `${run}-${nonce}`));
    await announceTenancy();
  });
});
