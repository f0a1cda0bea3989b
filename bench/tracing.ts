/**
 * What tracing and request logging cost on the write path (README: Tracing, "Cost when off"). For each setting
 * (tracing off with successful requests logged at debug, the same at info, tracing on with every request sampled
 * and sent as OTLP/JSON to a sink in this process), in interleaved rounds: a fresh database, the real server
 * process (`main.ts`, role `all`, PostgreSQL and Redis), a challenge of one action, then BENCH_TRACING_EVENTS
 * custom events that each complete it, at concurrency 8 over HTTP. Reported per setting: the server's CPU time
 * until it is idle again (its projectors and engine included) per event, which a busy shared machine disturbs far
 * less than throughput, and the requests' latency.
 *
 *   npx tsx bench/tracing.ts                                   # 3 rounds of 600 events
 *   BENCH_TRACING_ROUNDS=5 BENCH_TRACING_EVENTS=1000 npx tsx bench/tracing.ts
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, request } from 'node:http';
import { OutputTail, percentiles, runIfMain, scratchDatabase, sleep } from './support.ts';

const EVENTS = Number(process.env.BENCH_TRACING_EVENTS ?? 600);
const ROUNDS = Number(process.env.BENCH_TRACING_ROUNDS ?? 3);
const CONCURRENCY = 8;

export interface TracingSettingResult {
  setting: string;
  cpuMsPerEvent: number[];
  p50Ms: number[];
  p99Ms: number[];
}

/** CPU time (user + system) a process has used, in ms, from /proc (Linux). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function otlpSink(): Promise<{ endpoint: string; close(): void }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address() as { port: number };
  return { endpoint: `http://127.0.0.1:${address.port}`, close: () => server.close() };
}

async function measure(env: Record<string, string>): Promise<{ cpuMsPerEvent: number; p50: number; p99: number }> {
  const database = await scratchDatabase('engage_bench_tracing');
  const serverEnv = {
    ...process.env,
    DATABASE_URL: database.url(),
    REDIS_URL: process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379',
    PLATFORM_DOMAIN: 'bench.test',
    USER_TOKEN_SECRET: 'a-bench-secret-of-at-least-thirty-two-characters',
    RATE_LIMIT_API_TOKEN_REQUESTS: '1000000',
    PORT: '0',
    HOST: '127.0.0.1',
    ...env,
  };
  const created = spawnSync(process.execPath, ['--import', 'tsx', 'cli/engage.ts', 'org', 'create', '--name', 'Bench', '--slug', 'bench', '--json'], {
    env: { ...serverEnv, OTEL_EXPORTER_OTLP_ENDPOINT: '' },
    encoding: 'utf8',
  });
  if (created.status !== 0) throw new Error(created.stderr);
  const organisation = JSON.parse(created.stdout) as { domain: string; token: string };
  const server = spawn(process.execPath, ['--import', 'tsx', 'main.ts'], { env: serverEnv, stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    let listening: string | undefined;
    const log = new OutputTail(100_000, (line) => {
      if (!line.includes('engage listening')) return false;
      listening = line;
      return true;
    });
    server.stdout.on('data', (chunk: Buffer) => log.push(chunk));
    while (listening === undefined) {
      if (server.exitCode !== null) throw new Error(`the server exited:\n${log.text()}`);
      await sleep(100);
    }
    const port = (JSON.parse(listening) as { port: number }).port;
    const call = (method: string, path: string, body?: unknown) =>
      new Promise<{ status: number; body: any }>((resolve, reject) => {
        const payload = body === undefined ? undefined : JSON.stringify(body);
        const headers = { host: organisation.domain, 'x-api-token': organisation.token, ...(payload ? { 'content-type': 'application/json' } : {}) };
        const req = request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
          let text = '';
          res.on('data', (chunk: Buffer) => (text += chunk.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : null }));
        });
        req.on('error', reject);
        req.end(payload);
      });
    while ((await call('GET', '/api/v2/admin/communities')).status !== 200) await sleep(100);
    const communityId = (await call('POST', '/api/v2/admin/communities', { name: 'Bench' })).body.id as string;
    const images = { primaryImageUrl: '', secondaryImageUrl: '' };
    const details = { en: { title: 'Run', description: 'Run', light: images, dark: images } };
    await call('POST', '/api/v2/admin/challenges', {
      communityId,
      details,
      isLinear: false,
      startsAt: new Date(Date.now() - 60_000).toISOString(),
      expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
      actions: [{ key: 'ran', category: 'participation', criteria: [], xp: 10, isSkippable: false, details }],
      rewardDistribution: { points: 5, xp: 1, rewardAllocations: [], numberOfRewardsToReceive: 0 },
    });
    const logEvent = async (user: string) => {
      const started = performance.now();
      const response = await call('POST', '/api/v2/admin/events/custom', { eventName: 'ran', userId: user, communityId, autoCreateUser: true, payload: {} });
      if (response.status !== 200) throw new Error(`POST /events/custom: ${response.status} ${JSON.stringify(response.body)}`);
      return performance.now() - started;
    };
    for (let i = 0; i < 100; i++) await logEvent(`warm-${i % 20}`);
    const cpuBefore = cpuMs(server.pid!);
    const latencies: number[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < EVENTS) latencies.push(await logEvent(`user-${next++ % 200}`));
      }),
    );
    // The projectors and the engine go on after the last answer: count their work too, until the process idles.
    for (let before = -Infinity, now = cpuMs(server.pid!); now - before > 20; before = now, await sleep(1000), now = cpuMs(server.pid!));
    const { p50, p99 } = percentiles(latencies);
    return { cpuMsPerEvent: (cpuMs(server.pid!) - cpuBefore) / EVENTS, p50, p99 };
  } finally {
    server.kill('SIGTERM');
    if (server.exitCode === null) await once(server, 'exit');
    await database.drop();
  }
}

export async function run(): Promise<TracingSettingResult[]> {
  const sink = await otlpSink();
  const settings: Record<string, Record<string, string>> = {
    'off, LOG_REQUESTS=debug': { LOG_REQUESTS: 'debug' },
    'off, LOG_REQUESTS=info': { LOG_REQUESTS: 'info' },
    'on, every request sampled': { LOG_REQUESTS: 'debug', OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' },
  };
  const results = Object.keys(settings).map((setting): TracingSettingResult => ({ setting, cpuMsPerEvent: [], p50Ms: [], p99Ms: [] }));
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      for (const result of results) {
        const measured = await measure(settings[result.setting]!);
        result.cpuMsPerEvent.push(Number(measured.cpuMsPerEvent.toFixed(2)));
        result.p50Ms.push(Number(measured.p50.toFixed(1)));
        result.p99Ms.push(Number(measured.p99.toFixed(1)));
        console.error(
          `round ${round}/${ROUNDS}: ${result.setting}: ${measured.cpuMsPerEvent.toFixed(2)} ms of CPU per event, p50 ${measured.p50.toFixed(1)} ms`,
        );
      }
    }
  } finally {
    sink.close();
  }
  return results;
}

runIfMain(import.meta.url, run);
