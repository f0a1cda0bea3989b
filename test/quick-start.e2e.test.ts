import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { request } from 'node:http';
import { connect, createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { dataFolderOf } from '../infra/embedded-postgres.ts';
import { runningPostmaster, temporaryDirectories } from './support/embedded.ts';
import { waitUntil } from './support/projections.ts';

/**
 * The README's quick start, as a user runs it: `npm start` with no DATABASE_URL (the launcher compiles the
 * service when needed and runs it; the service runs a PostgreSQL of its own under DATA_DIR), the CLI
 * creating an organisation while the service runs, a leaderboard written with the token and read back;
 * then restarts on the same data directory, after SIGTERM and after kill -9.
 */
const directories = temporaryDirectories('engage-quick-start-');
const dataDir = directories.make;
const started: ChildProcess[] = [];

const envFor = (dir: string) => ({ ...process.env, DATA_DIR: dir, PORT: '0', LOG_LEVEL: 'info', DATABASE_URL: '', REDIS_URL: '' });

/** `npm start` as its script runs it: `node bin/start.mjs`; resolves once the service listens. */
async function start(dir: string, env: Record<string, string> = {}): Promise<{ service: ChildProcess; port: number; log: () => string }> {
  const service = spawn(process.execPath, ['bin/start.mjs'], { env: { ...envFor(dir), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  started.push(service);
  let log = '';
  service.stdout.on('data', (chunk: Buffer) => (log += chunk.toString()));
  service.stderr.on('data', (chunk: Buffer) => (log += chunk.toString()));
  let port = 0;
  await waitUntil(
    () => {
      if (service.exitCode !== null) throw new Error(`the service exited (${service.exitCode}):\n${log}`);
      const line = log.split('\n').find((entry) => entry.includes('"engage listening on'));
      if (line) port = JSON.parse(line).port;
      return port > 0;
    },
    60_000,
    'the service to listen',
  );
  return { service, port, log: () => log };
}

function engage(dir: string, args: string[]) {
  const result = spawnSync(process.execPath, ['bin/engage.mjs', ...args], { env: envFor(dir), encoding: 'utf8', timeout: 60_000 });
  expect(result.status, result.stderr).toBe(0);
  return result.stdout;
}

async function stop(service: ChildProcess, signal: NodeJS.Signals): Promise<number | null> {
  if (service.exitCode !== null || service.signalCode !== null) return service.exitCode;
  service.kill(signal);
  const [code] = await once(service, 'exit');
  return code as number | null;
}

afterAll(async () => {
  for (const service of started) await stop(service, 'SIGKILL');
  // Whatever still runs of a server a test killed its service under: stopped the way the service would.
  for (const dir of directories.made) {
    const pid = runningPostmaster(dir);
    if (pid) {
      process.kill(pid, 'SIGINT');
      await waitUntil(() => runningPostmaster(dir) === null, 30_000, 'the embedded PostgreSQL to stop');
    }
  }
  directories.removeAll();
});

describe('quick start in embedded mode', () => {
  it('runs on a PostgreSQL of its own: the CLI creates an organisation, its token writes and reads, and the data outlives restarts and kill -9', async () => {
    const dir = dataDir();
    const first = await start(dir);
    expect(first.log()).toMatch(/"mode":"embedded \(PostgreSQL on 127\.0\.0\.1:\d+, data in /);
    const postmaster = runningPostmaster(dir);
    expect(postmaster).not.toBeNull();

    // The CLI joins the service's PostgreSQL.
    const created = JSON.parse(engage(dir, ['org', 'create', '--name', 'Acme', '--slug', 'acme', '--json']));
    expect(Object.keys(created).sort()).toEqual(['domain', 'organisationId', 'token']);
    expect(created.domain).toBe('acme.localhost');
    expect(runningPostmaster(dir)).toBe(postmaster);

    const post = await call(first.port, 'POST', '/api/v2/admin/leaderboards', created.domain, created.token, {
      name: 'Weekly XP',
      metricType: 'total-xp',
      startsAt: '2026-01-05T00:00:00Z',
      status: 'live',
      period: 'weekly',
    });
    expect(post.status).toBe(200);
    const get = await call(first.port, 'GET', `/api/v2/admin/leaderboards/${post.body.id}`, created.domain, created.token, undefined, {
      'x-min-position': post.headers['x-event-position'] as string,
    });
    expect(get.status).toBe(200);
    expect(get.body).toEqual(post.body);
    const readBack = async (port: number) => {
      const again = await call(port, 'GET', `/api/v2/admin/leaderboards/${post.body.id}`, created.domain, created.token);
      expect(again.status).toBe(200);
      expect(again.body).toEqual(post.body);
    };

    // SIGTERM: the service stops gracefully, and its PostgreSQL with it.
    expect(await stop(first.service, 'SIGTERM')).toBe(0);
    expect(first.log()).toContain('"msg":"embedded PostgreSQL stopped"');
    expect(first.log()).toContain('"msg":"stopped"');
    expect(runningPostmaster(dir)).toBeNull();
    expect(existsSync(join(dataFolderOf(dir), 'postmaster.pid'))).toBe(false);

    // Started again on the same data directory: the data is there.
    const second = await start(dir);
    expect(second.log()).not.toContain('initialising the embedded PostgreSQL');
    await readBack(second.port);

    // kill -9 of the service: its PostgreSQL survives, and the next start joins it.
    const survivor = runningPostmaster(dir);
    await stop(second.service, 'SIGKILL');
    expect(runningPostmaster(dir)).toBe(survivor);
    const third = await start(dir);
    expect(runningPostmaster(dir)).toBe(survivor);
    await readBack(third.port);

    // kill -9 of the service and of every PostgreSQL process (a machine going down): the postmaster.pid
    // left behind does not stop the next start, and recovery keeps every committed write.
    await stop(third.service, 'SIGKILL');
    spawnSync('pkill', ['-KILL', '-P', String(survivor)]);
    process.kill(survivor!, 'SIGKILL');
    await waitUntil(() => runningPostmaster(dir) === null, 10_000, 'the killed PostgreSQL to be gone');
    expect(existsSync(join(dataFolderOf(dir), 'postmaster.pid'))).toBe(true);
    const fourth = await start(dir);
    expect(runningPostmaster(dir)).not.toBe(survivor);
    await readBack(fourth.port);
    expect(await stop(fourth.service, 'SIGINT')).toBe(0);
    expect(runningPostmaster(dir)).toBeNull();
  });

  it('a start that fails stops the PostgreSQL it started, and so does a signal during the start', async () => {
    // The port is taken: the start fails after the embedded server was started for it.
    const dir = dataDir();
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as AddressInfo).port;
    const failed = spawnSync(process.execPath, ['bin/start.mjs'], {
      env: { ...envFor(dir), PORT: String(port), HOST: '127.0.0.1' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    taken.close();
    expect(failed.status).toBe(1);
    expect(failed.stderr).toContain('EADDRINUSE');
    expect(failed.stdout).toContain('"msg":"embedded PostgreSQL stopped"');
    expect(runningPostmaster(dir)).toBeNull();

    // SIGINT while the first start initialises the data folder: the start finishes, then everything stops.
    const other = dataDir();
    const service = spawn(process.execPath, ['bin/start.mjs'], { env: envFor(other), stdio: ['ignore', 'pipe', 'pipe'] });
    started.push(service);
    let log = '';
    service.stdout.on('data', (chunk: Buffer) => (log += chunk.toString()));
    await waitUntil(() => log.includes('initialising the embedded PostgreSQL'), 60_000, 'the first start to begin');
    service.kill('SIGINT');
    const [code] = await once(service, 'exit');
    expect(code).toBe(0);
    expect(log).toContain('"msg":"stopping once the start has finished"');
    expect(log).toContain('"msg":"embedded PostgreSQL stopped"');
    expect(runningPostmaster(other)).toBeNull();
  });

  it('a stop that cannot finish in time still stops its PostgreSQL: a request whose body never ends holds the server open past SHUTDOWN_TIMEOUT_MS', async () => {
    const dir = dataDir();
    const service = await start(dir, { SHUTDOWN_TIMEOUT_MS: '1000' });
    expect(runningPostmaster(dir)).not.toBeNull();
    // A request in flight for good: its headers are read (the server answers 100 Continue), its body never completes.
    const socket = connect(service.port, '127.0.0.1');
    socket.on('error', () => undefined);
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
    socket.write(
      'POST /api/v2/admin/leaderboards HTTP/1.1\r\nHost: acme.localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n',
    );
    await waitUntil(() => received.includes('100 Continue'), 10_000, 'the server to read the request');
    socket.write('{"name":');

    expect(await stop(service.service, 'SIGTERM')).toBe(1);
    socket.destroy();
    expect(service.log()).toContain('"msg":"shutdown took too long; exiting"');
    expect(service.log()).toContain('"msg":"embedded PostgreSQL stopped"');
    expect(runningPostmaster(dir)).toBeNull();
  });

  it('refuses to start on a bad setting, naming the variable', () => {
    const result = spawnSync(process.execPath, ['bin/start.mjs'], {
      env: { ...envFor(dataDir()), PORT: 'eighty', PLATFORM_DOMAIN: 'not a domain' },
      encoding: 'utf8',
    });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('PORT: must be a whole number');
    expect(result.stderr).toContain('PLATFORM_DOMAIN');
  });
});

function call(port: number, method: string, path: string, host: string, token: string, body?: unknown, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: Record<string, unknown>; body: any }>((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      { host: '127.0.0.1', port, method, path, headers: { host, 'x-api-token': token, 'content-type': 'application/json', ...headers } },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    if (payload) req.write(payload);
    req.end();
  });
}
