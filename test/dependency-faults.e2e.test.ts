import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chownSync, closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import nodemailer from 'nodemailer';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrganisation } from '../command-api/organisations.ts';
import { loadConfig } from '../infra/config.ts';
import { settleWithin } from '../infra/database.ts';
import { openService, type Service } from '../service.ts';
import { httpClient, type HttpResponse } from './support/http.ts';
import { waitUntil } from './support/projections.ts';

/**
 * The service against dependencies that hang or go away, on a PostgreSQL and a Redis of this file's own
 * (started here on free ports; the shared servers are never touched): a frozen PostgreSQL (every process
 * of it stopped with SIGSTOP) turns writes, reads and `/readyz` into 503s with Retry-After instead of
 * hangs, and the service recovers once it runs again; a stopped Redis makes `/readyz` a 503 while
 * commands still work, and the job queued meanwhile runs once Redis is back; a process started before
 * its PostgreSQL and Redis waits for them and then starts. Every request here gives up after 15 s, so a
 * hang fails the test; no assertion is about time.
 */

const PLATFORM_DOMAIN = 'engage.test';
const NO_ANSWER_MS = 15_000;

describe('hung and missing dependencies', () => {
  const cleanups: (() => Promise<unknown> | unknown)[] = [];
  const sent: string[] = [];
  let postgres: OwnPostgres;
  let redis: OwnRedis;
  let service: Service;
  let request: ReturnType<typeof httpClient>;
  let tenant: { domain: string; token: string };

  /** A request as the tenant, failing the test if nothing answers within NO_ANSWER_MS. */
  const call = (method: string, path: string, body?: unknown): Promise<HttpResponse> =>
    settleWithin(
      request(method, path, { host: tenant.domain, headers: { 'x-api-token': tenant.token }, body }),
      NO_ANSWER_MS,
      () => new Error(`${method} ${path}: no answer within ${NO_ANSWER_MS} ms`),
    );
  let leaderboards = 0;
  const newLeaderboard = () => ({
    name: `Weekly ${++leaderboards}`,
    metricType: 'total-xp',
    startsAt: '2026-01-05T00:00:00Z',
    status: 'live',
    period: 'weekly',
  });

  beforeAll(async () => {
    postgres = await OwnPostgres.create();
    cleanups.push(() => postgres.destroy());
    await postgres.start();
    redis = await OwnRedis.create();
    cleanups.push(() => redis.destroy());
    await redis.start();

    const dataDir = mkdtempSync(join(tmpdir(), 'engage-faults-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const config = loadConfig({ DATA_DIR: dataDir, PLATFORM_DOMAIN, LOG_LEVEL: 'silent', DATABASE_URL: postgres.url, REDIS_URL: redis.url });
    const capture = nodemailer.createTransport({
      name: 'capture',
      version: '1',
      send(mail, done) {
        sent.push(String(mail.data.to));
        done(null, { envelope: mail.message.getEnvelope(), messageId: mail.message.messageId() });
      },
    });
    service = await openService(config, pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }), {
      runtime: { scanIntervalMs: 100 },
      outside: { mailTransport: capture },
    });
    cleanups.push(() => service.close());
    const listener: Server = service.app.listen(0, '127.0.0.1');
    await once(listener, 'listening');
    cleanups.push(() => new Promise((resolve) => listener.close(resolve)));
    request = httpClient(listener);
    const created = await createOrganisation(service, { name: 'Faults', slug: 'faults' }, { actor: 'test' });
    tenant = { domain: created.domain, token: created.token };
  });

  afterAll(async () => {
    const failures: unknown[] = [];
    for (const cleanup of cleanups.splice(0).reverse())
      await Promise.resolve()
        .then(cleanup)
        .catch((error: unknown) => failures.push(error));
    if (failures.length > 0) {
      const reasons = failures.map((failure) => (failure instanceof Error ? (failure.stack ?? failure.message) : String(failure)));
      throw new AggregateError(failures, `cleaning up after the dependency faults failed:\n${reasons.join('\n')}`);
    }
  });

  it('a frozen PostgreSQL: a write, a read and /readyz answer 503 with Retry-After, and all is well once it runs again', async () => {
    const before = await call('POST', '/api/v2/admin/leaderboards', newLeaderboard());
    expect(before.status).toBe(200);

    postgres.freeze();
    try {
      const write = await call('POST', '/api/v2/admin/leaderboards', newLeaderboard());
      expect(write.status).toBe(503);
      expect(write.body).toMatchObject({ code: 'SERVICE_UNAVAILABLE' });
      expect(write.headers['retry-after']).toMatch(/^\d+$/);
      const read = await call('GET', `/api/v2/admin/leaderboards/${before.body.id}`);
      expect(read.status).toBe(503);
      expect(read.body).toMatchObject({ code: 'SERVICE_UNAVAILABLE' });
      expect(read.headers['retry-after']).toMatch(/^\d+$/);
      const ready = await call('GET', '/readyz');
      expect(ready.status).toBe(503);
      expect(ready.body.checks.postgres).toMatch(/^down/);
    } finally {
      postgres.thaw();
    }

    await waitUntil(async () => (await call('GET', '/readyz')).status === 200, 60_000, '/readyz to answer 200 after PostgreSQL runs again');
    const write = await call('POST', '/api/v2/admin/leaderboards', newLeaderboard());
    expect(write.status).toBe(200);
    // Ready means the projections lag by less than READY_MAX_LAG_SECONDS: the write made just before the
    // freeze may still be on its way to the read model while the projector backs off from the outage.
    await waitUntil(async () => (await call('GET', `/api/v2/admin/leaderboards/${before.body.id}`)).status === 200, 20_000, 'the read model to catch up');
    const read = await call('GET', `/api/v2/admin/leaderboards/${before.body.id}`);
    expect(read.body).toEqual(before.body);
  });

  it('a stopped Redis: /readyz answers 503, a command still succeeds, and its job runs once Redis is back', async () => {
    await redis.stop();
    try {
      const ready = await call('GET', '/readyz');
      expect(ready.status).toBe(503);
      expect(ready.body.checks.redis).toMatch(/^down/);
      expect(ready.body.checks.postgres).toBe('ok');
      const invited = await call('POST', '/api/v2/admin/teams/invite', { emails: ['while-redis-is-down@example.com'] });
      expect(invited.status).toBe(200);
      expect(invited.body.results).toMatchObject([{ email: 'while-redis-is-down@example.com', success: true }]);
      // Only the queue delivers jobs, and it has no Redis.
      expect(sent).not.toContain('while-redis-is-down@example.com');
    } finally {
      await redis.start();
    }

    await waitUntil(() => sent.includes('while-redis-is-down@example.com'), 60_000, 'the invitation e-mail job to run once Redis is back');
    await waitUntil(async () => (await call('GET', '/readyz')).status === 200, 60_000, '/readyz to answer 200 once Redis is back');
  });

  it('a process started before its PostgreSQL and Redis waits for each, saying so, then starts', async () => {
    const laterPostgres = await OwnPostgres.create();
    cleanups.push(() => laterPostgres.destroy());
    const laterRedis = await OwnRedis.create();
    cleanups.push(() => laterRedis.destroy());
    const dataDir = mkdtempSync(join(tmpdir(), 'engage-faults-process-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const port = await freePort();
    let log = '';
    const child = spawn(process.execPath, ['--import', 'tsx', 'main.ts'], {
      env: {
        ...process.env,
        ROLE: 'all',
        PORT: String(port),
        HOST: '127.0.0.1',
        DATA_DIR: dataDir,
        DATABASE_URL: laterPostgres.url,
        REDIS_URL: laterRedis.url,
        PLATFORM_DOMAIN,
        LOG_LEVEL: 'info',
        USER_TOKEN_SECRET: 'a-secret-of-at-least-thirty-two-characters',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    cleanups.push(() => stopProcess(child));
    for (const stream of [child.stdout, child.stderr]) stream.on('data', (chunk: Buffer) => (log += chunk.toString()));
    const running = () => {
      if (child.exitCode !== null) throw new Error(`the process exited (${child.exitCode}):\n${log}`);
    };

    await waitUntil(() => (running(), log.includes('"msg":"waiting for PostgreSQL"')), 60_000, 'the process to wait for PostgreSQL');
    await laterPostgres.start();
    await waitUntil(() => (running(), log.includes('"msg":"waiting for Redis"')), 60_000, 'the process to wait for Redis');
    await laterRedis.start();
    const readyz = () => settleWithin(fetch(`http://127.0.0.1:${port}/readyz`), NO_ANSWER_MS, () => new Error('/readyz: no answer'));
    await waitUntil(async () => (running(), (await readyz().catch(() => null))?.status === 200), 60_000, 'the process to start and be ready');
    expect(log).toContain('"msg":"PostgreSQL answers"');
    expect(log).toContain('"msg":"Redis answers"');

    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    expect(code).toBe(0);
  });
});

/** The server binaries of the newest PostgreSQL installed (POSTGRES_BIN_DIR chooses another). */
function postgresBinaries(): string {
  if (process.env.POSTGRES_BIN_DIR) return process.env.POSTGRES_BIN_DIR;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((version) => existsSync(join(root, version, 'bin', 'postgres'))) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  // No binaries is a failure, never a skip: this suite is how the timeouts are shown to work.
  if (!newest) throw new Error(`no PostgreSQL server binaries under ${root}; install them or set POSTGRES_BIN_DIR`);
  return join(root, newest, 'bin');
}

/** PostgreSQL refuses to run as root: as root, its processes run as the `postgres` user. */
function serverUser(): { uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return {};
  const field = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: field('-u'), gid: field('-g') };
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (!address || typeof address === 'string') throw new Error('no free port');
  return address.port;
}

/** `signal`, then SIGKILL if it is still there after 10 s; resolves once it has exited. */
/**
 * Signals a process that `ps` listed a moment ago: a backend whose session just closed (the service's pools
 * as it stops) may have exited since, which is no failure (it failed the suite's clean-up once, under load).
 */
function signalIfRunning(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

async function stopProcess(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited.finally(() => clearTimeout(timer));
}

/** A PostgreSQL cluster of this file's own, in a temporary directory, on a free port. */
class OwnPostgres {
  private server: ChildProcess | null = null;
  private readonly user = serverUser();

  private constructor(
    private readonly dir: string,
    private readonly port: number,
  ) {}

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  static async create(): Promise<OwnPostgres> {
    const dir = mkdtempSync(join(tmpdir(), 'engage-faults-pg-'));
    const cluster = new OwnPostgres(dir, await freePort());
    if (cluster.user.uid !== undefined) chownSync(dir, cluster.user.uid, cluster.user.gid!);
    execFileSync(
      join(postgresBinaries(), 'initdb'),
      ['-D', join(dir, 'data'), '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync', '--no-instructions'],
      {
        ...cluster.user,
        stdio: 'pipe',
      },
    );
    return cluster;
  }

  async start(): Promise<void> {
    const log = openSync(join(this.dir, 'server.log'), 'a');
    this.server = spawn(
      join(postgresBinaries(), 'postgres'),
      [
        '-D',
        join(this.dir, 'data'),
        '-p',
        String(this.port),
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'unix_socket_directories=',
        '-c',
        'fsync=off',
        '-c',
        'max_connections=60',
      ],
      { ...this.user, detached: true, stdio: ['ignore', log, log] },
    );
    closeSync(log);
    const server = this.server;
    await waitUntil(
      async () => {
        if (server.exitCode !== null) throw new Error(`PostgreSQL exited (${server.exitCode}):\n${readFileSync(join(this.dir, 'server.log'), 'utf8')}`);
        const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 1000 });
        client.on('error', () => undefined);
        return client
          .connect()
          .then(() => client.query('select 1'))
          .then(
            () => true,
            () => false,
          )
          .finally(() => client.end().catch(() => undefined));
      },
      30_000,
      'the test PostgreSQL to accept connections',
    );
  }

  /**
   * Stops the postmaster, then every process it started (backends and background workers: each is a process
   * group of its own), so nothing of the server answers, as with a frozen host. The postmaster first: once
   * it is stopped it cannot start another backend.
   */
  freeze(): void {
    process.kill(this.server!.pid!, 'SIGSTOP');
    for (const pid of this.children()) signalIfRunning(pid, 'SIGSTOP');
  }

  thaw(): void {
    for (const pid of this.children()) signalIfRunning(pid, 'SIGCONT');
    process.kill(this.server!.pid!, 'SIGCONT');
  }

  private children(): number[] {
    // ps exits with 1 when there is none: its output is what counts.
    const listed = spawnSync('ps', ['-o', 'pid=', '--ppid', String(this.server!.pid)], { encoding: 'utf8' });
    return listed.stdout
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map(Number);
  }

  async destroy(): Promise<void> {
    const server = this.server;
    if (server && server.exitCode === null && server.signalCode === null) {
      this.thaw();
      // SIGQUIT: immediate shutdown; the postmaster stops its backends and cleans up after itself.
      await stopProcess(server, 'SIGQUIT');
    }
    rmSync(this.dir, { recursive: true, force: true, maxRetries: 5 });
  }
}

/** A Redis of this file's own, without persistence, on a free port: stopped and started again at will. */
class OwnRedis {
  private server: ChildProcess | null = null;

  private constructor(
    private readonly dir: string,
    private readonly port: number,
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  static async create(): Promise<OwnRedis> {
    return new OwnRedis(mkdtempSync(join(tmpdir(), 'engage-faults-redis-')), await freePort());
  }

  async start(): Promise<void> {
    // A new log each start: readiness is read from it.
    const log = openSync(join(this.dir, 'server.log'), 'w');
    this.server = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir], {
      detached: true,
      stdio: ['ignore', log, log],
    });
    closeSync(log);
    const server = this.server;
    await waitUntil(
      () => {
        if (server.exitCode !== null) throw new Error(`Redis exited (${server.exitCode}):\n${readFileSync(join(this.dir, 'server.log'), 'utf8')}`);
        return readFileSync(join(this.dir, 'server.log'), 'utf8').includes('Ready to accept connections');
      },
      30_000,
      'the test Redis to accept connections',
    );
  }

  async stop(): Promise<void> {
    if (this.server) await stopProcess(this.server);
    this.server = null;
  }

  async destroy(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true, maxRetries: 5 });
  }
}
