import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { createOrganisation, issueToken, revokeToken } from '../../command-api/organisations.ts';
import { streamStatesOf } from '../../command-api/stream-states.ts';
import { externalUserIdStream } from '../../command-api/users.ts';
import { loadConfig } from '../../infra/config.ts';
import type { Logger } from '../../infra/logging.ts';
import { createHttpServer } from '../../infra/http/plumbing.ts';
import { openService, type Service, type ServiceOptions } from '../../service.ts';
import { sql } from 'kysely';
import { formatPosition } from '../../infra/event-store/port.ts';
import { waitForProjections } from '../../projectors/runtime/index.ts';
import { projections } from '../../projectors/index.ts';
import { freshDatabase } from './databases.ts';
import { httpClient } from './http.ts';

export const PLATFORM_DOMAIN = 'engage.test';

/** An organisation as the tests use it: its id, its standard domain and an admin token. */
export type Tenant = { organisationId: string; domain: string; token: string };

/** Request options that speak as this organisation: its Host and its API token, plus any extra headers. */
export function asTenant(tenant: Tenant, extra: Record<string, string> = {}) {
  return { host: tenant.domain, headers: { 'x-api-token': tenant.token, ...extra } };
}

/**
 * The composed service on a fresh database of the test's PostgreSQL server, listening on a free port, with
 * helpers to set tenants up.
 */
export async function startTestService(
  options: Pick<ServiceOptions, 'outside' | 'jobs' | 'jobOptions' | 'clock'> & { env?: Record<string, string>; logger?: Logger } = {},
) {
  const server = await freshDatabase();
  await server.database.close();
  const dataDir = mkdtempSync(join(tmpdir(), 'engage-test-'));
  const config = loadConfig({
    DATA_DIR: dataDir,
    PLATFORM_DOMAIN,
    LOG_LEVEL: 'silent',
    BODY_LIMIT: '100kb',
    READ_YOUR_WRITES_TIMEOUT_MS: '10000',
    // Rate limits have their own suite (rate-limits.e2e); elsewhere they would only trip tests of other things.
    RATE_LIMIT_API_TOKEN_REQUESTS: '1000000',
    RATE_LIMIT_USER_TOKEN_REQUESTS: '1000000',
    RATE_LIMIT_FAILED_AUTHENTICATIONS: '1000000',
    // The production limits answer 503 within a second or two by design (dependency-faults tests them on a
    // server of its own); on a test machine busy with other suites a burst of 200 requests may rightly wait longer.
    DATABASE_CONNECT_TIMEOUT_MS: '15000',
    DATABASE_STATEMENT_TIMEOUT_MS: '30000',
    DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS: '15000',
    DATABASE_URL: server.url,
    ...(process.env.TEST_REDIS_URL ? { REDIS_URL: process.env.TEST_REDIS_URL } : {}),
    ...options.env,
  });
  const { env: _env, logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }), ...serviceOptions } = options;
  const service: Service = await openService(config, logger, { runtime: { scanIntervalMs: 100 }, ...serviceOptions });
  const listener: Server = createHttpServer(service.app).listen(0, '127.0.0.1');
  await new Promise((resolve) => listener.once('listening', resolve));
  const metadata = { actor: 'test' };
  const request = httpClient(listener);
  return {
    service,
    request,
    createOrganisation: (slug: string) => createOrganisation(service, { name: `Organisation ${slug}`, slug }, metadata),
    issueToken: (input: Parameters<typeof issueToken>[1]) => issueToken(service, input, metadata),
    revokeToken: (tokenId: string) => revokeToken(service, { tokenId }, metadata),
    /**
     * Resolves once every read model (and process manager) has seen every event committed so far, including
     * what process managers appended meanwhile (the engine's facts): it waits again until the newest
     * committed event stays the same. Reads that event itself: the store's `head()` stops short of
     * transactions still open elsewhere.
     */
    async settle() {
      const newest = async () => {
        const last = (
          await sql<{ transaction_id: string; global_position: string }>`
          select transaction_id::text as transaction_id, global_position from es_events order by es_events.transaction_id desc, es_events.global_position desc limit 1`.execute(
            service.database.db,
          )
        ).rows[0];
        return last ? formatPosition(BigInt(last.transaction_id), BigInt(last.global_position)) : null;
      };
      const names = projections.map((p) => p.name);
      for (let position = await newest(), previous = null; position !== null && position !== previous; previous = position, position = await newest()) {
        if (!(await waitForProjections(service.database.db, names, position, 20_000))) throw new Error('projections did not catch up');
      }
    },
    /**
     * Events committed so far, visible to readers or not: the store's own count stops at the oldest open
     * transaction (a projector's batch, say), so it could grow after a refused request and fake an append.
     * `except` leaves out streams whose name starts with one of these (e.g. `webhookdelivery-`, written later
     * by a process manager).
     */
    async eventCount(except: string[] = []) {
      let query = service.database.db.selectFrom('es_events').select((eb) => eb.fn.countAll<string>().as('count'));
      for (const prefix of except) query = query.where('stream_name', 'not like', `${prefix}%`);
      const row = await query.executeTakeFirstOrThrow();
      return Number(row.count);
    },
    /**
     * A user created over HTTP whose claim this process then forgets, as if another process had created it:
     * what `autoCreateUser` meets when it takes an external id unread.
     */
    async userCreatedElsewhere(tenant: Tenant, externalUserId: string): Promise<{ userId: string; claimStream: string }> {
      const created = await request('POST', '/api/v2/admin/users', { ...asTenant(tenant), body: { externalUserId } });
      if (created.status !== 201) throw new Error(`POST /users answered ${created.status}`);
      const claimStream = externalUserIdStream(tenant.organisationId, externalUserId);
      streamStatesOf(service.store).forget(claimStream);
      return { userId: (created.body as { id: string }).id, claimStream };
    },
    async close() {
      await new Promise((resolve) => listener.close(resolve));
      await service.close();
      await server.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export type TestService = Awaited<ReturnType<typeof startTestService>>;
