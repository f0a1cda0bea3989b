import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { createOrganisation, issueToken, revokeToken } from '../../command-api/organisations.ts';
import { loadConfig } from '../../infra/config.ts';
import { openService, type Service } from '../../service.ts';
import { freshServerDatabase } from './databases.ts';
import { httpClient } from './http.ts';

export const PLATFORM_DOMAIN = 'engage.test';

/**
 * The composed service on a fresh database of the real PostgreSQL server (PGlite only where no server
 * answers and REQUIRE_SERVICES is unset), listening on a free port, with helpers to set tenants up.
 */
export async function startTestService() {
  const server = await freshServerDatabase();
  await server?.database.close();
  const dataDir = mkdtempSync(join(tmpdir(), 'engage-test-'));
  const config = loadConfig({
    DATA_DIR: dataDir,
    PLATFORM_DOMAIN,
    LOG_LEVEL: 'silent',
    BODY_LIMIT: '100kb',
    READ_YOUR_WRITES_TIMEOUT_MS: '10000',
    ...(server?.url ? { DATABASE_URL: server.url } : {}),
    ...(process.env.TEST_REDIS_URL ? { REDIS_URL: process.env.TEST_REDIS_URL } : {}),
  });
  const service: Service = await openService(config, pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }), { runtime: { scanIntervalMs: 100 } });
  const listener: Server = service.app.listen(0, '127.0.0.1');
  await new Promise((resolve) => listener.once('listening', resolve));
  const metadata = { actor: 'test' };
  return {
    service,
    request: httpClient(listener),
    createOrganisation: (slug: string) => createOrganisation(service, { name: `Organisation ${slug}`, slug }, metadata),
    issueToken: (input: Parameters<typeof issueToken>[1]) => issueToken(service, input, metadata),
    revokeToken: (tokenId: string) => revokeToken(service, { tokenId }, metadata),
    async eventCount() {
      return service.store.countAfter(null);
    },
    async close() {
      await new Promise((resolve) => listener.close(resolve));
      await service.close();
      await server?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export type TestService = Awaited<ReturnType<typeof startTestService>>;
