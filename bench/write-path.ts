/**
 * The HTTP write path under load (issue 11, item 6; issue 13, item 6): autocannon against the real service,
 * started as a child process the way it is deployed, beside a reference measured in the same run on the same
 * PostgreSQL: a bare `node:http` server (bench/write-reference.ts, a process of its own) that parses the same
 * JSON body and inserts it as one JSONB row with a unique key through a `pg` pool of the same size.
 *
 * Modes, each on a fresh database (or data directory), the organisation and its token made by the product's
 * own CLI (`engage org create`), a community and 20 known users through the API:
 * - `command-api`: `node bin/start.mjs --role=command-api` on the local PostgreSQL, Redis at BENCH_REDIS_URL;
 * - `all`: the same with `--role=all` (projectors and jobs in the process too);
 * - `embedded`: `node bin/start.mjs` with no DATABASE_URL (and no Redis), as `npm start` runs on a fresh
 *   DATA_DIR; the reference then writes to that same embedded PostgreSQL.
 *
 * Scenarios, each at every connection count (BENCH_WRITE_CONNECTIONS, 16 and 64): a custom event for a known
 * user, for a new user created with it (`autoCreateUser`, a new id each request), for a known user with a
 * nonce; a batch of 100 custom events (`POST /events/custom/batch`, a nonce each; "not available" when the
 * service answers 404); a leaderboard created (last: live leaderboards make every later event cost more).
 * Each service run follows a run of its reference (one row per request, or 100) at the same connection count,
 * measured right before it with the service idle, into its table emptied first. Reported per run: requests/s
 * (events/s), latency p50/p99, the ratio to the reference, non-2xx answers (a run with any says so), SQL
 * statements per request when the service exports `engage_database_statements_total` (read from /metrics
 * before and after), `/healthz` latency sampled by a separate process during the load; per mode each
 * process's peak resident set.
 *
 *   npx tsx bench/write-path.ts                                          # every mode, 3 s per run
 *   BENCH_WRITE_MODES=command-api BENCH_WRITE_SECONDS=10 npx tsx bench/write-path.ts
 *
 * BENCH_WRITE_NODE_FLAGS (space-separated) are given to the service's node, before `bin/start.mjs` (NODE_OPTIONS
 * is not passed on): `--cpu-prof --cpu-prof-dir=/tmp/profiles` writes a profile of each mode's service as it
 * stops, `--max-semi-space-size=64` tries a V8 setting.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { dataFolderOf, localUrlOf, readCredentials, readPostmaster, stopServer } from '../infra/embedded-postgres.ts';
import {
  OutputTail,
  PeakSampler,
  commitDescription,
  cpuTicksOf,
  idlePercent,
  machineIdleSince,
  formatNumber,
  replaceReadmeSection,
  percentiles,
  processSampler,
  runIfMain,
  scratchDatabase,
  silentLogger,
  sleep,
  type Percentiles,
} from './support.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SECONDS = Number(process.env.BENCH_WRITE_SECONDS ?? 3);
const WARMUP_SECONDS = Number(process.env.BENCH_WRITE_WARMUP_S ?? 1);
/**
 * Each mode's service (and its reference) first takes this long of the known-user load, once, before any
 * run is measured: a process just started runs its code unoptimised until V8 has compiled the hot paths. With
 * a second of warm-up only, the first run of a mode (the known user at 16 connections) cost the command API
 * 0.95-1.24 ms of CPU a request, and the same run repeated after the 64-connection one 0.56-0.65 ms. With these
 * 6 s it still cost 0.71-0.97 ms in six runs (2026-11-29): warm-up is part of the gap, not all of it. A deployed
 * service serves warm, and the reference takes the same warm-up.
 */
const MODE_WARMUP_SECONDS = Number(process.env.BENCH_WRITE_MODE_WARMUP_S ?? 6);
const SETTLE_SECONDS = Number(process.env.BENCH_WRITE_SETTLE_S ?? 5);
const CONNECTIONS = (process.env.BENCH_WRITE_CONNECTIONS ?? '16,64').split(',').map(Number);
const MODES = (process.env.BENCH_WRITE_MODES ?? 'command-api,all,embedded').split(',').map((mode) => mode.trim()) as Mode[];
const POOL_SIZE = Number(process.env.BENCH_WRITE_POOL_SIZE ?? 10);
const NODE_FLAGS = (process.env.BENCH_WRITE_NODE_FLAGS ?? '').split(/\s+/).filter(Boolean);
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
/** The scenarios to run (all by default): to study one, e.g. `BENCH_WRITE_SCENARIOS=known`. */
const SCENARIO_KEYS = process.env.BENCH_WRITE_SCENARIOS?.split(',').map((key) => key.trim());
const BATCH_SIZE = 100;
const KNOWN_USERS = 20;
const STATEMENTS_METRIC = 'engage_database_statements_total';
/** A run with fewer answers than this per connection is flagged as unsteady. */
const UNSTEADY_BELOW = 5;

export type Mode = 'command-api' | 'all' | 'embedded';
type ScenarioKey = 'known' | 'auto' | 'nonce' | 'batch' | 'leaderboard';

/** Issue 11's targets, on custom events (the three single-event scenarios). */
export const TARGETS = {
  'command-api': { ratio: 0.5, p99MsAt16: 25 },
  all: { ratio: 0.3 },
  embedded: { ratio: 0.3, healthzP99Ms: 50, rssMb: 300 },
} as const;

export interface LoadResult {
  /** 2xx answers per second of the measured run. */
  requestsPerSecond: number;
  /** Events (rows) per second: requests/s times the events per request. */
  eventsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  non2xx: number;
  /** Connection errors and timeouts. */
  errors: number;
  /** Batch answers that refused an event (a 200 whose results hold an error). */
  refused: number;
  statusCodes: Record<string, number>;
  seconds: number;
  connections: number;
  /**
   * CPU time (user + system) the server process spent per 2xx answer during the run, in ms: what a busy
   * shared machine disturbs far less than throughput (PostgreSQL's own CPU not included).
   */
  cpuMsPerRequest: number | null;
  /**
   * The machine's idle share during the run (0 to 1, all cores): near 0, the run was bound by the machine's CPU
   * (the service, PostgreSQL and autocannon share it); well above, by a wait in the path.
   */
  machineIdle: number | null;
}

/** `/healthz` latencies (ms) during a run, and the probes that failed (not 200, or no answer). */
export type HealthzSample = Percentiles & { failures: number };

export interface ScenarioRun {
  scenario: ScenarioKey;
  label: string;
  connections: number;
  eventsPerRequest: number;
  /** Null when the service does not have the route (404 to the probe) or the probe failed. */
  service: LoadResult | null;
  unavailable?: string;
  reference: LoadResult | null;
  /**
   * Set when the service was still busy (catching up) after REFERENCE_SETTLE_SECONDS: `earlier` when an earlier
   * run of the reference stands in, `beside` when none did and the reference ran beside the busy service.
   */
  referenceBesideBusyService?: 'earlier' | 'beside';
  /** Service events/s over reference events/s. */
  ratio: number | null;
  statementsPerRequest: number | null;
  healthz: HealthzSample | null;
  /** Null where issue 11 sets no target (batch, leaderboards). */
  target: { text: string; met: boolean } | null;
}

export interface ModeResult {
  mode: Mode;
  error?: string;
  /** The PostgreSQL the service and the reference wrote to. */
  postgres: string | null;
  startSeconds: number | null;
  runs: ScenarioRun[];
  /** Every run of the reference, in order: each one measured right before the service run it is the reference of. */
  references: { kind: 'single' | 'batch'; connections: number; result: LoadResult }[];
  peakRssMb: { service: number | null; reference: number | null; postgres: number | null };
  rssTarget: { text: string; met: boolean } | null;
}

export interface WritePathResult {
  date: string;
  commit: string;
  machine: string;
  totalSeconds: number;
  /** The machine's load average (1 min) when the run started and when it ended. */
  loadAverage: { start: number; end: number };
  seconds: number;
  warmupSeconds: number;
  /** The known-user load each mode's service and reference took once before any run (`MODE_WARMUP_SECONDS`). */
  modeWarmupSeconds: number;
  connections: number[];
  poolSize: number;
  batchSize: number;
  /** BENCH_WRITE_NODE_FLAGS: the flags the service's node ran with (a profiler slows it down). */
  nodeFlags: string[];
  modes: ModeResult[];
}

// ------------------------------------------------------------------------------------------------ scenarios

interface Target {
  domain: string;
  token: string;
  communityId: string;
  knownUsers: string[];
}

interface Scenario {
  key: ScenarioKey;
  label: string;
  path: string;
  eventsPerRequest: number;
  reference: 'single' | 'batch';
  customEvent: boolean;
  body(target: Target, n: number): unknown;
}

const run = Date.now().toString(36);
const pick = <T>(items: readonly T[], n: number) => items[n % items.length]!;
const customEvent = (target: Target, userId: string, extra: Record<string, unknown> = {}) => ({
  eventName: 'bench-logged',
  userId,
  communityId: target.communityId,
  payload: { source: 'bench', score: 42 },
  ...extra,
});

const SCENARIOS: Scenario[] = [
  {
    key: 'known',
    label: 'Custom event, known user',
    path: '/api/v2/admin/events/custom',
    eventsPerRequest: 1,
    reference: 'single',
    customEvent: true,
    body: (t, n) => customEvent(t, pick(t.knownUsers, n)),
  },
  {
    key: 'auto',
    label: 'Custom event, user created with it (autoCreateUser, a new id each)',
    path: '/api/v2/admin/events/custom',
    eventsPerRequest: 1,
    reference: 'single',
    customEvent: true,
    body: (t, n) => customEvent(t, `auto-${run}-${n}`, { autoCreateUser: true }),
  },
  {
    key: 'nonce',
    label: 'Custom event, known user, with a nonce',
    path: '/api/v2/admin/events/custom',
    eventsPerRequest: 1,
    reference: 'single',
    customEvent: true,
    body: (t, n) => customEvent(t, pick(t.knownUsers, n), { nonce: `nonce-${run}-${n}` }),
  },
  {
    key: 'batch',
    label: `Batch of ${BATCH_SIZE} custom events (known users, a nonce each)`,
    path: '/api/v2/admin/events/custom/batch',
    eventsPerRequest: BATCH_SIZE,
    reference: 'batch',
    customEvent: false,
    // The body is the array of events (each with the nonce a batch requires); the answer one result each.
    body: (t, n) => Array.from({ length: BATCH_SIZE }, (_, i) => customEvent(t, pick(t.knownUsers, n * BATCH_SIZE + i), { nonce: `batch-${run}-${n}-${i}` })),
  },
  {
    key: 'leaderboard',
    label: 'Leaderboard created (live, weekly, total-xp)',
    path: '/api/v2/admin/leaderboards',
    eventsPerRequest: 1,
    reference: 'single',
    customEvent: false,
    body: (_t, n) => ({ name: `Bench ${n}`, metricType: 'total-xp', startsAt: '2026-01-05T00:00:00Z', status: 'live', period: 'weekly' }),
  },
];

// ------------------------------------------------------------------------------------------------ processes

interface Started {
  child: ChildProcess;
  port: number;
  output(): string;
  stop(): Promise<void>;
}

/** Starts a process and waits (at most `timeoutMs`) for the stdout line `portOf` finds a port in. */
async function startProcess(args: string[], env: NodeJS.ProcessEnv, portOf: (line: string) => number | null, timeoutMs: number): Promise<Started> {
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let port: number | null = null;
  const log = new OutputTail(50_000, (line) => {
    port = portOf(line);
    return port !== null;
  });
  const take = (chunk: Buffer) => log.push(chunk);
  child.stdout.on('data', take);
  child.stderr.on('data', take);
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    await exited;
    clearTimeout(killer);
  };
  const deadline = Date.now() + timeoutMs;
  while (port === null) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${args.join(' ')} exited before listening:\n${log.text().slice(-4000)}`);
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${args.join(' ')} did not listen within ${timeoutMs / 1000} s:\n${log.text().slice(-4000)}`);
    }
    await sleep(50);
  }
  return { child, port, output: () => log.text(), stop };
}

const listeningPort = (line: string): number | null => {
  if (!line.includes('engage listening')) return null;
  try {
    return (JSON.parse(line) as { port: number }).port;
  } catch {
    return null;
  }
};

function startService(role: 'command-api' | 'all' | null, env: NodeJS.ProcessEnv): Promise<Started> {
  return startProcess([...NODE_FLAGS, 'bin/start.mjs', ...(role ? [`--role=${role}`] : [])], env, listeningPort, 180_000);
}

function startReference(databaseUrl: string): Promise<Started> {
  const env = { ...process.env, REFERENCE_DATABASE_URL: databaseUrl, REFERENCE_POOL_SIZE: String(POOL_SIZE) };
  return startProcess(
    ['--import', 'tsx', 'bench/write-reference.ts'],
    env,
    (line) => {
      try {
        return line.startsWith('{"listening"') ? (JSON.parse(line) as { listening: number }).listening : null;
      } catch {
        return null;
      }
    },
    60_000,
  );
}

function cli(args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['bin/engage.mjs', ...args], { cwd: ROOT, env, timeout: 120_000, maxBuffer: 10 * 2 ** 20 }, (error, stdout, stderr) =>
      error ? reject(new Error(`engage ${args.join(' ')}: ${String(error)}\n${stderr}`)) : resolve(stdout),
    );
  });
}

// ------------------------------------------------------------------------------------------------ HTTP

interface Answer {
  status: number;
  text: string;
}

function call(port: number, method: string, path: string, headers: Record<string, string> = {}, body?: unknown): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      { host: '127.0.0.1', port, method, path, headers: { ...headers, ...(payload ? { 'content-type': 'application/json' } : {}) }, timeout: 30_000 },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within 30 s`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/**
 * A set-up request: a 503 (the pool busy on a loaded machine, by design) or a 429 is tried again, up to 20
 * times, so that the set-up does not fail where the load would only count an error.
 */
async function setUp(port: number, method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<Answer> {
  for (let attempt = 1; ; attempt++) {
    const answer = await call(port, method, path, headers, body);
    if ((answer.status !== 503 && answer.status !== 429) || attempt >= 20) return answer;
    await sleep(250 * Math.min(attempt, 4));
  }
}

const apiHeaders = (target: Target) => ({ host: target.domain, 'x-api-token': target.token });

/** The organisation (through the CLI), a community and the known users (through the API). */
async function prepare(port: number, env: NodeJS.ProcessEnv): Promise<Target> {
  const created = JSON.parse((await cli(['org', 'create', '--name', 'Bench', '--slug', 'bench', '--json'], env)).trim().split('\n').pop()!) as {
    domain: string;
    token: string;
  };
  const target: Target = { domain: created.domain, token: created.token, communityId: '', knownUsers: [] };
  const community = await setUp(port, 'POST', '/api/v2/admin/communities', apiHeaders(target), { name: 'Bench' });
  if (community.status !== 201 && community.status !== 200) throw new Error(`POST /communities: ${community.status} ${community.text}`);
  target.communityId = (JSON.parse(community.text) as { id: string }).id;
  const users = Array.from({ length: KNOWN_USERS }, (_, i) => `known-${i}`);
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < users.length) {
        const userId = users[next++]!;
        const answer = await setUp(port, 'POST', '/api/v2/admin/events/custom', apiHeaders(target), customEvent(target, userId, { autoCreateUser: true }));
        if (answer.status !== 200) throw new Error(`creating ${userId}: ${answer.status} ${answer.text}`);
      }
    }),
  );
  target.knownUsers = users;
  return target;
}

// ------------------------------------------------------------------------------------------------ load

let sent = 0;
const benchStarted = performance.now();
const say = (message: string) => console.error(`[write-path ${((performance.now() - benchStarted) / 1000).toFixed(1)} s] ${message}`);

async function load(
  server: Started,
  scenario: Scenario,
  target: Target,
  connections: number,
  seconds: number,
  headers: Record<string, string>,
): Promise<LoadResult> {
  const batch = scenario.eventsPerRequest > 1;
  const cpuBefore = cpuTicks(server.child.pid!);
  const machineIdleSoFar = machineIdleSince();
  const result = await autocannon({
    url: `http://127.0.0.1:${server.port}`,
    connections,
    duration: seconds,
    timeout: 10,
    requests: [
      {
        method: 'POST',
        path: scenario.path,
        headers: { ...headers, 'content-type': 'application/json' },
        setupRequest: (req) => ({ ...req, body: JSON.stringify(scenario.body(target, sent++)) }),
      },
    ],
    // A batch answers 200 with one result per event: one that holds an error was refused.
    ...(batch ? { verifyBody: (body?: string | Buffer) => !String(body ?? '').includes('"error"') } : {}),
  });
  const ok = result['2xx'];
  const cpuMs = (cpuTicks(server.child.pid!) - cpuBefore) * 10;
  const machineIdle = machineIdleSoFar();
  const statusCodes: Record<string, number> = {};
  for (const [code, { count }] of Object.entries(result.statusCodeStats ?? {})) statusCodes[code] = Number(count);
  return {
    requestsPerSecond: ok / result.duration,
    eventsPerSecond: (ok * scenario.eventsPerRequest) / result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    requests: ok + result.non2xx,
    non2xx: result.non2xx,
    errors: result.errors,
    refused: batch ? result.mismatches : 0,
    statusCodes,
    seconds: result.duration,
    connections,
    cpuMsPerRequest: ok > 0 ? cpuMs / ok : null,
    machineIdle,
  };
}

/**
 * `/healthz` latency, sampled every 20 ms during the load by a separate process (plain JavaScript, one
 * keep-alive connection) so that the load generator's own busy event loop does not add to it. Resolves once
 * the process has started and answered its first sample (which is not kept): a node process's start costs a
 * good part of a core for a tenth of a second, which the service's run, not the reference's, paid when the
 * probe started with the load.
 */
async function probeHealthz(port: number): Promise<{ stop(): Promise<HealthzSample | null> }> {
  const script = `
    import http from 'node:http';
    const port = Number(process.argv[1]);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const latencies = []; let failures = 0; let stopped = false;
    process.stdin.on('end', () => (stopped = true)).resume();
    const get = () => new Promise((resolve) => {
      const started = performance.now();
      const req = http.get({ host: '127.0.0.1', port, path: '/healthz', agent, timeout: 10000 }, (res) => {
        res.resume(); res.on('end', () => { if (res.statusCode !== 200) failures++; resolve(performance.now() - started); });
      });
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', () => { failures++; resolve(performance.now() - started); });
    });
    await get();
    process.stdout.write('ready\\n');
    while (!stopped) {
      const took = await get(); latencies.push(took);
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, 20 - took)));
    }
    agent.destroy();
    console.log(JSON.stringify({ latencies, failures }));`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script, String(port)], { stdio: ['pipe', 'pipe', 'ignore'] });
  let stdout = '';
  let announced: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => (announced = resolve));
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    if (stdout.includes('ready\n')) announced();
  });
  child.on('error', () => announced());
  const exited = once(child, 'exit').catch(() => undefined);
  void exited.then(() => announced());
  await Promise.race([ready, sleep(10_000)]);
  return {
    async stop() {
      child.stdin.end();
      const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(killer);
      try {
        const { latencies, failures } = JSON.parse(stdout.slice(stdout.indexOf('ready\n') + 'ready\n'.length)) as { latencies: number[]; failures: number };
        return { ...percentiles(latencies), failures };
      } catch {
        return null;
      }
    },
  };
}

/** The sum of every series of the statements counter at /metrics; null when the service does not export it. */
async function statementsCounter(port: number): Promise<number | null> {
  try {
    const answer = await call(port, 'GET', '/metrics');
    let total: number | null = null;
    for (const line of answer.text.split('\n')) {
      if (!line.startsWith(STATEMENTS_METRIC)) continue;
      const rest = line.slice(STATEMENTS_METRIC.length);
      if (rest[0] !== '{' && rest[0] !== ' ') continue;
      const value = Number(line.slice(line.lastIndexOf(' ') + 1));
      if (Number.isFinite(value)) total = (total ?? 0) + value;
    }
    return total;
  } catch {
    return null;
  }
}

/** CPU ticks (1/100 s) a process has used; 0 when it cannot be read. */
const cpuTicks = (pid: number) => cpuTicksOf(pid) ?? 0;

/**
 * Waits (at most `seconds`, SETTLE_SECONDS by default) until the service is idle: its projectors and jobs
 * catch up between runs. Answers whether it got idle.
 */
async function settle(pid: number, seconds = SETTLE_SECONDS): Promise<boolean> {
  const deadline = Date.now() + seconds * 1000;
  let before = cpuTicks(pid);
  while (Date.now() < deadline) {
    await sleep(250);
    const now = cpuTicks(pid);
    if (now - before <= 3) return true;
    before = now;
  }
  return false;
}

/**
 * How long a reference run waits for the service to be idle. The service's catch-up after a heavy run took
 * longer than SETTLE_SECONDS, and a reference run beside it was slowed and flattered the service's ratio:
 * leaderboards in role `all` at 64 connections, 0.80x with the reference at 2,315 req/s against 4,134 for the
 * run before (the service was still busy 120 s after creating 2,700 live leaderboards).
 */
const REFERENCE_SETTLE_SECONDS = 30;

/**
 * The peak resident set of the embedded PostgreSQL's processes (the largest one: each maps the shared
 * buffers, so their sum counts those many times), from /proc every 500 ms.
 */
function postgresSampler(dataDir: string): PeakSampler {
  const peaks = new Map<number, number>();
  return new PeakSampler(() => {
    const postmaster = readPostmaster(dataFolderOf(dataDir))?.pid;
    if (!postmaster) return 0;
    const pids = [postmaster];
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
        if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster) pids.push(Number(entry));
      } catch {
        // gone meanwhile
      }
    }
    for (const pid of pids) {
      try {
        const hwm = Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
        peaks.set(pid, Math.max(peaks.get(pid) ?? 0, hwm));
      } catch {
        // gone meanwhile
      }
    }
    return Math.max(0, ...peaks.values());
  }, 500).start();
}

// ------------------------------------------------------------------------------------------------ a mode

function serviceEnvironment(mode: Mode, databaseUrl: string | null, dataDir: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATA_DIR: dataDir,
    PLATFORM_DOMAIN: 'bench.test',
    PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_POOL_SIZE: String(POOL_SIZE),
    // The load comes from one token and one address: the limits must not be what is measured.
    RATE_LIMIT_API_TOKEN_REQUESTS: '1000000',
    RATE_LIMIT_WINDOW_SECONDS: '1',
  };
  for (const name of ['DATABASE_URL', 'REDIS_URL', 'ROLE', 'OTEL_EXPORTER_OTLP_ENDPOINT', 'NODE_OPTIONS']) delete env[name];
  if (mode !== 'embedded') {
    env.DATABASE_URL = databaseUrl!;
    env.REDIS_URL = REDIS_URL;
    env.USER_TOKEN_SECRET = 'a-bench-secret-of-at-least-thirty-two-characters';
  }
  return env;
}

/**
 * The URL of the embedded PostgreSQL a service runs on DATA_DIR (its credentials and its postmaster.pid):
 * through its Unix socket when it has one, as the service connects, so that both go the same way.
 */
function embeddedUrl(dataDir: string): string {
  const folder = dataFolderOf(dataDir);
  const postmaster = readPostmaster(folder);
  if (!postmaster?.port) throw new Error(`no running PostgreSQL in ${folder}`);
  return localUrlOf(readCredentials(folder), postmaster.port, postmaster.socketDir);
}

async function runMode(mode: Mode): Promise<ModeResult> {
  const result: ModeResult = {
    mode,
    postgres: null,
    startSeconds: null,
    runs: [],
    references: [],
    peakRssMb: { service: null, reference: null, postgres: null },
    rssTarget: null,
  };
  const dataDir = mkdtempSync(join(tmpdir(), 'engage-bench-write-'));
  const database = mode === 'embedded' ? null : await scratchDatabase('engage_bench_write');
  const env = serviceEnvironment(mode, database?.url() ?? null, dataDir);
  let service: Started | null = null;
  let reference: Started | null = null;
  let serviceRss: ReturnType<typeof processSampler> | null = null;
  let referenceRss: ReturnType<typeof processSampler> | null = null;
  let postgresRss: PeakSampler | null = null;
  try {
    // Server mode: the service creates its tables as it starts, then the CLI the organisation (as in a
    // deployment); embedded mode: the service starts its PostgreSQL and the CLI joins it.
    const started = performance.now();
    service = await startService(mode === 'embedded' ? null : mode, env);
    result.startSeconds = (performance.now() - started) / 1000;
    serviceRss = processSampler(service.child.pid!);
    if (mode === 'embedded') postgresRss = postgresSampler(dataDir);
    say(`${mode}: service listening on ${service.port} after ${result.startSeconds.toFixed(1)} s`);
    const referenceUrl = mode === 'embedded' ? embeddedUrl(dataDir) : database!.url();
    result.postgres = await serverVersion(referenceUrl);
    const referenceStarted = startReference(referenceUrl);
    referenceStarted.catch(() => undefined);
    const target = await prepare(service.port, env).catch(async (error: unknown) => {
      await (await referenceStarted.catch(() => null))?.stop();
      throw error;
    });
    reference = await referenceStarted;
    referenceRss = processSampler(reference.child.pid!);
    say(`${mode}: organisation, community and ${KNOWN_USERS} users created; reference listening`);

    // Each service run is measured right after a run of its reference at the same connection count (one row per
    // request, or 100): the machine's speed drifts by a fifth and more within a mode, and a reference measured
    // once at the start of the mode made the ratios of later runs follow the drift. The service is idle first
    // (`settle`), so its catch-up never slows the reference down.
    const known = SCENARIOS.find((scenario) => scenario.key === 'known')!;
    const batch = SCENARIOS.find((scenario) => scenario.key === 'batch')!;
    const referenceScenario = { single: known, batch } as const;
    const referenceWarmed = new Set<'single' | 'batch'>();
    const runs = SCENARIOS.filter(selected);
    if (MODE_WARMUP_SECONDS > 0) {
      say(`${mode}: warming the reference and the service up (${MODE_WARMUP_SECONDS} s each)`);
      await load(reference, known, target, CONNECTIONS[0]!, MODE_WARMUP_SECONDS, {});
      await load(service, known, target, CONNECTIONS[0]!, MODE_WARMUP_SECONDS, apiHeaders(target));
    }
    const measureReference = async (kind: 'single' | 'batch', connections: number): Promise<LoadResult> => {
      const scenario = referenceScenario[kind];
      if (!referenceWarmed.has(kind) && WARMUP_SECONDS > 0) await load(reference!, scenario, target, CONNECTIONS[0]!, WARMUP_SECONDS, {});
      referenceWarmed.add(kind);
      // From an empty table each time, as when every reference ran first: the batches' references leave a
      // million rows, and single rows inserted into that index afterwards ran at half the speed.
      const emptied = await call(reference!.port, 'DELETE', '/rows');
      if (emptied.status !== 200) throw new Error(`the reference could not empty its table: ${emptied.text.slice(0, 300)}`);
      const measured = await load(reference!, scenario, target, connections, SECONDS, {});
      result.references.push({ kind, connections, result: measured });
      say(`${mode}: reference ${kind} at ${connections}: ${formatNumber(measured.eventsPerSecond)} rows/s, p99 ${measured.p99Ms} ms${idleNote(measured)}`);
      return measured;
    };

    for (const scenario of runs) {
      const probe = await setUp(service.port, 'POST', scenario.path, apiHeaders(target), scenario.body(target, sent++));
      const unavailable =
        probe.status === 404 && scenario.key === 'batch'
          ? 'not available (404)'
          : probe.status < 200 || probe.status > 299
            ? `the probe request answered ${probe.status}: ${probe.text.slice(0, 300)}`
            : scenario.key === 'batch' && probe.text.includes('"error"')
              ? `the probe batch had refused events: ${probe.text.slice(0, 300)}`
              : null;
      if (!unavailable && WARMUP_SECONDS > 0) {
        await load(service, scenario, target, CONNECTIONS[0]!, WARMUP_SECONDS, apiHeaders(target));
      }
      for (const connections of CONNECTIONS) {
        const runResult: ScenarioRun = {
          scenario: scenario.key,
          label: scenario.label,
          connections,
          eventsPerRequest: scenario.eventsPerRequest,
          service: null,
          reference: null,
          ratio: null,
          statementsPerRequest: null,
          healthz: null,
          target: null,
        };
        if (unavailable) {
          runResult.unavailable = unavailable;
        } else {
          // A service still busy after REFERENCE_SETTLE_SECONDS would slow its reference down: the last reference
          // run of the same kind and connection count measured beside an idle service stands in, when there is one.
          const idle = await settle(service.child.pid!, REFERENCE_SETTLE_SECONDS);
          const earlier = idle ? undefined : result.references.findLast((r) => r.kind === scenario.reference && r.connections === connections);
          if (!idle) runResult.referenceBesideBusyService = earlier ? 'earlier' : 'beside';
          const referenceResult = earlier?.result ?? (await measureReference(scenario.reference, connections));
          runResult.reference = referenceResult;
          const healthz = await probeHealthz(service.port);
          await settle(service.child.pid!);
          const statementsBefore = await statementsCounter(service.port);
          const measured = await load(service, scenario, target, connections, SECONDS, apiHeaders(target));
          runResult.healthz = await healthz.stop();
          const statementsAfter = await statementsCounter(service.port);
          runResult.service = measured;
          runResult.ratio = measured.eventsPerSecond / referenceResult.eventsPerSecond;
          const ok = measured.requests - measured.non2xx;
          if (statementsBefore !== null && statementsAfter !== null && ok > 0) runResult.statementsPerRequest = (statementsAfter - statementsBefore) / ok;
        }
        runResult.target = targetOf(mode, scenario, runResult);
        result.runs.push(runResult);
        say(
          `${mode}: ${scenario.key} at ${connections}: ${
            runResult.service
              ? `${formatNumber(runResult.service.eventsPerSecond)} events/s, p99 ${runResult.service.p99Ms} ms, ratio ${runResult.ratio?.toFixed(3)}, non-2xx ${runResult.service.non2xx}${idleNote(runResult.service)}`
              : runResult.unavailable
          }`,
        );
      }
    }
  } catch (error) {
    result.error = error instanceof Error ? error.message : String(error);
    say(`${mode} failed: ${result.error}`);
  } finally {
    await reference?.stop().catch(() => undefined);
    await service?.stop().catch(() => undefined);
    result.peakRssMb.service = serviceRss ? (await serviceRss.stop()).peakRssMb : null;
    result.peakRssMb.reference = referenceRss ? (await referenceRss.stop()).peakRssMb : null;
    result.peakRssMb.postgres = postgresRss ? (await postgresRss.stop()) || null : null;
    await database?.drop().catch(() => undefined);
    // A service that died (not stopped) leaves its embedded PostgreSQL running, still writing in the folder.
    await stopServer(dataFolderOf(dataDir), silentLogger);
    try {
      rmSync(dataDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
    } catch (error) {
      // The other modes' results matter more than a scratch folder left behind.
      say(`${mode}: ${dataDir} left behind: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  if (mode === 'embedded' && result.peakRssMb.service !== null) {
    const limit = TARGETS.embedded.rssMb;
    result.rssTarget = { text: `each process ≤ ${limit} MB`, met: result.peakRssMb.service <= limit && (result.peakRssMb.postgres ?? 0) <= limit };
  }
  return result;
}

/** Issue 11's target for a run: custom events only. A run with errors or non-2xx answers misses it. */
function selected(scenario: Scenario): boolean {
  return !SCENARIO_KEYS || SCENARIO_KEYS.includes(scenario.key);
}

function targetOf(mode: Mode, scenario: Scenario, run: ScenarioRun): { text: string; met: boolean } | null {
  if (!scenario.customEvent) return null;
  const s = run.service;
  const clean = s !== null && s.non2xx === 0 && s.errors === 0;
  const ratioMet = clean && run.ratio !== null && run.ratio >= TARGETS[mode].ratio;
  if (mode === 'command-api') {
    const { ratio, p99MsAt16 } = TARGETS['command-api'];
    if (run.connections === 16) return { text: `≥ ${ratio}×, p99 ≤ ${p99MsAt16} ms`, met: ratioMet && s.p99Ms <= p99MsAt16 };
    return { text: `≥ ${ratio}×`, met: ratioMet };
  }
  if (mode === 'embedded') {
    const { ratio, healthzP99Ms } = TARGETS.embedded;
    return {
      text: `≥ ${ratio}×, /healthz p99 ≤ ${healthzP99Ms} ms`,
      met: ratioMet && run.healthz !== null && run.healthz.failures === 0 && run.healthz.p99 <= healthzP99Ms,
    };
  }
  return { text: `≥ ${TARGETS.all.ratio}×`, met: ratioMet };
}

export async function main(): Promise<WritePathResult> {
  for (const mode of MODES) if (!['command-api', 'all', 'embedded'].includes(mode)) throw new Error(`BENCH_WRITE_MODES: unknown mode ${mode}`);
  const date = new Date().toISOString().slice(0, 19) + 'Z';
  const loadStart = loadavg()[0]!;
  // Compiled once before any service starts, so that no service's peak RSS holds a build.
  await new Promise<void>((resolve, reject) =>
    execFile(
      process.execPath,
      ['--input-type=module', '-e', "await (await import('./bin/build.mjs')).ensureBuilt()"],
      { cwd: ROOT, timeout: 300_000 },
      (error) => (error ? reject(new Error(`building the service failed: ${error.message}`, { cause: error })) : resolve()),
    ),
  );
  const modes: ModeResult[] = [];
  for (const mode of MODES) modes.push(await runMode(mode));
  const cpu = cpus();
  return {
    date,
    commit: commitDescription(),
    machine: `${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${Math.round(totalmem() / 2 ** 30)} GB`,
    totalSeconds: (performance.now() - benchStarted) / 1000,
    loadAverage: { start: loadStart, end: loadavg()[0]! },
    seconds: SECONDS,
    warmupSeconds: WARMUP_SECONDS,
    modeWarmupSeconds: MODE_WARMUP_SECONDS,
    connections: CONNECTIONS,
    poolSize: POOL_SIZE,
    batchSize: BATCH_SIZE,
    nodeFlags: NODE_FLAGS,
    modes,
  };
}

async function serverVersion(url: string): Promise<string | null> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return String((await client.query<{ server_version: string }>('show server_version')).rows[0]!.server_version);
  } catch {
    return null;
  } finally {
    await client.end().catch(() => undefined);
  }
}

// ------------------------------------------------------------------------------------------------ report

const n = (value: number, digits = 0) => formatNumber(value, digits);
const ms = (value: number) => `${n(value, value < 10 ? 1 : 0)} ms`;
const x = (ratio: number | null) => (ratio === null || !Number.isFinite(ratio) ? '-' : `${ratio.toFixed(ratio < 0.1 ? 3 : 2)}×`);
const MODE_TITLES: Record<Mode, string> = {
  'command-api': 'server, `--role=command-api`',
  all: 'server, `--role=all`',
  embedded: 'embedded (`npm start`, no DATABASE_URL)',
};

/** The machine's idle share during a run, for the progress lines. */
const idleNote = (result: LoadResult) => (result.machineIdle === null ? '' : `, machine ${idlePercent(result.machineIdle)}`);

/** Throughput and latency of a run; a run in which no request was answered says so instead. */
function figures(result: LoadResult, eventsPerRequest: number): string {
  if (result.requests === 0) return `**no answer within the ${n(result.seconds, 1)} s run**`;
  return `${rate(result, eventsPerRequest)}, p50 ${ms(result.p50Ms)}, p99 ${ms(result.p99Ms)}`;
}

function rate(result: LoadResult, eventsPerRequest: number): string {
  const cpu =
    (result.cpuMsPerRequest === null
      ? ''
      : `, ${n(result.cpuMsPerRequest, result.cpuMsPerRequest < 10 ? 2 : 1)} ms CPU/req (${n((result.cpuMsPerRequest * result.requestsPerSecond) / 1000, 2)} core)`) +
    idleNote(result);
  return eventsPerRequest > 1
    ? `${n(result.eventsPerSecond)} events/s (${n(result.requestsPerSecond)} req/s${cpu})`
    : `${n(result.requestsPerSecond)} req/s${cpu}`;
}

function problems(result: LoadResult): string {
  const found: string[] = [];
  if (result.non2xx > 0) {
    const codes = Object.entries(result.statusCodes)
      .filter(([code]) => !code.startsWith('2'))
      .map(([code, count]) => `${count}× ${code}`)
      .join(', ');
    found.push(`**${n(result.non2xx)} non-2xx** (${codes})`);
  }
  if (result.errors > 0) found.push(`**${n(result.errors)} connection errors**`);
  if (result.refused > 0) found.push(`**${n(result.refused)} batches with refused events**`);
  // A closed loop measures steadily once each connection has been answered many times; a run whose answers
  // take a good part of its length is not steady (raise BENCH_WRITE_SECONDS).
  const perConnection = (result.requests - result.non2xx) / result.connections;
  if (perConnection < UNSTEADY_BELOW) found.push(`unsteady: ${n(perConnection, 1)} answers per connection`);
  return found.length > 0 ? `; ${found.join(', ')}` : '';
}

/** The write path's section of bench/README.md's results: a table per run, one row per scenario and connection count. */
export function writePathReport(result: WritePathResult): string {
  const header = ['Mode', 'Scenario', 'Conn.', 'Service', 'Reference', 'Ratio', 'Statements / request', 'Target'];
  const rows: string[][] = [];
  for (const mode of result.modes) {
    if (mode.error && mode.runs.length === 0) {
      rows.push([MODE_TITLES[mode.mode], `**failed**: ${mode.error.split('\n')[0]!}`, '', '', '', '', '', '']);
      continue;
    }
    for (const run of mode.runs) {
      const s = run.service;
      const service = s
        ? `${figures(s, run.eventsPerRequest)}${mode.mode === 'embedded' && run.healthz ? `; /healthz p99 ${ms(run.healthz.p99)}` : ''}${problems(s)}`
        : (run.unavailable ?? '-');
      const reference = run.reference
        ? `${figures(run.reference, run.eventsPerRequest)}${problems(run.reference)}${
            run.referenceBesideBusyService === 'earlier'
              ? ' (an earlier run: the service was still busy)'
              : run.referenceBesideBusyService === 'beside'
                ? '; **run beside the service, still busy**'
                : ''
          }`
        : '-';
      const perRequest = run.statementsPerRequest;
      const statements = !s
        ? ''
        : perRequest === null
          ? 'n/a'
          : `${n(perRequest, 1)}${run.eventsPerRequest > 1 ? ` (${n(perRequest / run.eventsPerRequest, 2)} per event)` : ''}`;
      const target = run.target ? `${run.target.text}: ${run.target.met ? 'met' : '**missed**'}` : '';
      rows.push([MODE_TITLES[mode.mode], run.label, String(run.connections), service, reference, x(run.ratio), statements, target]);
    }
    const rss = mode.peakRssMb;
    rows.push([
      MODE_TITLES[mode.mode],
      `Peak RSS: the service, the reference${mode.mode === 'embedded' ? ', the largest PostgreSQL process' : ''}${mode.error ? ` (**the mode stopped early**: ${mode.error.split('\n')[0]!})` : ''}`,
      '',
      rss.service === null ? '-' : `${n(rss.service)} MB${mode.startSeconds === null ? '' : `; answered after ${n(mode.startSeconds, 1)} s`}`,
      rss.reference === null ? '-' : `${n(rss.reference)} MB`,
      '',
      rss.postgres === null ? '' : `PostgreSQL ${n(rss.postgres)} MB`,
      mode.rssTarget ? `${mode.rssTarget.text}: ${mode.rssTarget.met ? 'met' : '**missed**'}` : '',
    ]);
  }
  const line = (cells: string[]) => `| ${cells.map((cell) => cell.replaceAll('|', '\\|')).join(' | ')} |`;
  const postgres = [
    ...new Set(result.modes.map((mode) => (mode.postgres ? `${mode.mode === 'embedded' ? 'embedded ' : ''}${mode.postgres}` : null)).filter(Boolean)),
  ];
  return [
    `Write path: run ${result.date} at commit ${result.commit}; ${result.machine}; PostgreSQL ${postgres.join(', ') || 'unknown'}; took ${n(result.totalSeconds)} s. ` +
      `Autocannon, ${result.seconds} s per run after ${result.warmupSeconds} s of warm-up per scenario (and ${result.modeWarmupSeconds} s of the known-user load per mode, for the service and the reference alike, before the first); each service run right after a run of its reference; a pool of ${result.poolSize} in the service and in the reference. ` +
      (result.nodeFlags.length > 0 ? `The service's node ran with \`${result.nodeFlags.join(' ')}\`. ` : '') +
      `Load average ${n(result.loadAverage.start, 1)} at the start and ${n(result.loadAverage.end, 1)} at the end (2 cores${result.loadAverage.start > 2 || result.loadAverage.end > 2 ? ': the machine was busy with other work, which the ratios to the reference measured in the same run allow for only in part' : ''}).`,
    '',
    [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n'),
  ].join('\n');
}

export const README_START = '<!-- bench:write-path:start -->';
export const README_END = '<!-- bench:write-path:end -->';

/**
 * Run alone (not from `npm run bench`), it also keeps its results: `bench/results/write-path-latest.json`
 * and the write-path table of bench/README.md.
 */
runIfMain(import.meta.url, async () => {
  const result = await main();
  const markdown = writePathReport(result);
  console.error(`\n${markdown}\n`);
  // A run of some scenarios only is a study, not the latest results.
  if (!process.env.BENCH_RESULT_FILE && !SCENARIO_KEYS) {
    mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
    writeFileSync(join(ROOT, 'bench/results/write-path-latest.json'), JSON.stringify(result, null, 2));
    replaceReadmeSection(README_START, README_END, markdown, join(ROOT, 'bench/README.md'));
  }
  return result;
});
