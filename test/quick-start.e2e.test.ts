import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitUntil } from './support/projections.ts';

/**
 * The README's quick start, as a user runs it: `npm start` in embedded mode (PGlite, no servers), the CLI
 * creating an organisation while the server runs, a leaderboard written and read back with the token.
 */
describe('quick start in embedded mode', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'engage-quick-start-'));
  const env = { ...process.env, DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'info', DATABASE_URL: '', REDIS_URL: '' };
  let server: ChildProcess;
  let port = 0;
  let log = '';

  beforeAll(async () => {
    server = spawn(process.execPath, ['--import', 'tsx', 'main.ts'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    server.stdout!.on('data', (chunk: Buffer) => (log += chunk.toString()));
    server.stderr!.on('data', (chunk: Buffer) => (log += chunk.toString()));
    await waitUntil(() => existsSync(join(dataDir, 'server.json')), 60_000, 'the embedded server to start');
    port = JSON.parse(readFileSync(join(dataDir, 'server.json'), 'utf8')).port;
  });
  afterAll(async () => {
    if (server.exitCode === null) server.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('creates an organisation with the CLI, then writes and reads a leaderboard with its token', async () => {
    const cli = spawnSync(process.execPath, ['--import', 'tsx', 'cli/engage.ts', 'org', 'create', '--name', 'Acme', '--slug', 'acme', '--json'], {
      env,
      encoding: 'utf8',
    });
    expect(cli.status, cli.stderr).toBe(0);
    const created = JSON.parse(cli.stdout);
    expect(Object.keys(created).sort()).toEqual(['domain', 'organisationId', 'token']);
    expect(created.domain).toBe('acme.localhost');

    const post = await call(port, 'POST', '/api/v2/admin/leaderboards', created.domain, created.token, {
      name: 'Weekly XP',
      metricType: 'total-xp',
      startsAt: '2026-01-05T00:00:00Z',
      status: 'live',
      period: 'weekly',
    });
    expect(post.status).toBe(200);
    const get = await call(port, 'GET', `/api/v2/admin/leaderboards/${post.body.id}`, created.domain, created.token, undefined, {
      'x-min-position': post.headers['x-event-position'] as string,
    });
    expect(get.status).toBe(200);
    expect(get.body).toEqual(post.body);
  });

  it('stops gracefully on SIGTERM and releases the data directory', async () => {
    server.kill('SIGTERM');
    const [code] = await once(server, 'exit');
    expect(code).toBe(0);
    expect(log).toContain('stopped');
    expect(existsSync(join(dataDir, 'server.json'))).toBe(false);
  });

  it('refuses to start on a bad setting, naming the variable', () => {
    const result = spawnSync(process.execPath, ['--import', 'tsx', 'main.ts'], {
      env: { ...env, PORT: 'eighty', PLATFORM_DOMAIN: 'not a domain' },
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
