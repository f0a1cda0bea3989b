/**
 * What the benchmarks share: scratch databases on the local PostgreSQL server (dropped `with (force)`,
 * with error handlers on every client so a terminated connection never crashes the run), percentiles,
 * and samplers of the process's memory and of its PostgreSQL connections.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { pino } from 'pino';
import { quoteIdentifier } from '../infra/database.ts';

export const adminUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export const silentLogger = pino({ level: 'silent' });

/** The URL of another database on the bench server; `applicationName` tags its sessions in pg_stat_activity. */
export function databaseUrl(name: string, applicationName?: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  if (applicationName) url.searchParams.set('application_name', applicationName);
  return url.toString();
}

/** A client of the server's maintenance database that survives the server terminating it. */
export async function adminClient(): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: adminUrl });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

export async function databaseExists(name: string): Promise<boolean> {
  const admin = await adminClient();
  try {
    return (await admin.query('select 1 from pg_database where datname = $1', [name])).rowCount === 1;
  } finally {
    await admin.end().catch(() => undefined);
  }
}

export async function createDatabase(name: string): Promise<void> {
  const admin = await adminClient();
  try {
    await admin.query(`create database ${quoteIdentifier(name)}`);
  } finally {
    await admin.end().catch(() => undefined);
  }
}

/** Drops a database whatever still holds a session on it; call it after closing this process's pools. */
export async function dropDatabase(name: string): Promise<void> {
  const admin = await adminClient();
  try {
    await admin.query(`drop database if exists ${quoteIdentifier(name)} with (force)`);
  } finally {
    await admin.end().catch(() => undefined);
  }
}

/** A fresh database of this run's own. */
export async function scratchDatabase(prefix: string): Promise<{ name: string; url(applicationName?: string): string; drop(): Promise<void> }> {
  const name = `${prefix}_${Date.now().toString(36)}_${process.pid}`;
  await createDatabase(name);
  return { name, url: (applicationName) => databaseUrl(name, applicationName), drop: () => dropDatabase(name) };
}

export interface Percentiles {
  count: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentiles of a sample (milliseconds, or whatever unit it is in). */
export function percentiles(values: readonly number[]): Percentiles {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p: number) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!);
  return {
    count: sorted.length,
    p50: at(50),
    p95: at(95),
    p99: at(99),
    max: sorted.length === 0 ? NaN : sorted[sorted.length - 1]!,
    mean: sorted.length === 0 ? NaN : sorted.reduce((sum, value) => sum + value, 0) / sorted.length,
  };
}

/** Samples something every `intervalMs` and keeps the peak. */
export class PeakSampler {
  peak = 0;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

  constructor(
    private readonly sample: () => number | Promise<number>,
    private readonly intervalMs: number,
  ) {}

  start(): this {
    const tick = () => {
      if (this.running) return;
      this.running = Promise.resolve()
        .then(this.sample)
        .then((value) => {
          if (value > this.peak) this.peak = value;
        })
        .catch(() => undefined)
        .finally(() => (this.running = null));
    };
    tick();
    this.timer = setInterval(tick, this.intervalMs);
    return this;
  }

  async stop(): Promise<number> {
    if (this.timer) clearInterval(this.timer);
    await this.running;
    return this.peak;
  }
}

/** Peak resident set size of this process, sampled every 100 ms, in MB. */
export function rssSampler(): PeakSampler {
  return new PeakSampler(() => process.memoryUsage().rss / 1024 / 1024, 100).start();
}

/**
 * Peak number of sessions a process opened as `applicationName` on the database (its pool, and its
 * `<name>:listen`, `<name>:control` and `<name>:session` connections), sampled every 250 ms from one client
 * of its own, which is not counted.
 */
/**
 * Samples (every 250 ms) how many sessions `applicationName` holds, and, when PostgreSQL runs on this machine
 * (its backends' /proc entries are readable), the CPU time those backends spent while sampled: where a
 * benchmark's time goes on the server's side. `postgresCpuSeconds` is null when it cannot be read.
 */
export async function connectionSampler(
  database: string,
  applicationName: string,
): Promise<{ stop(): Promise<{ peakConnections: number; postgresCpuSeconds: number | null }> }> {
  const client = new pg.Client({ connectionString: databaseUrl(database, 'engage-bench-sampler') });
  client.on('error', () => undefined);
  await client.connect();
  const ticks = new Map<number, { first: number; last: number }>();
  let readable = true;
  const sampler = new PeakSampler(async () => {
    // Parallel workers (of a query, of an index rebuild) carry their leader's name: their CPU counts, but
    // they are not connections.
    const { rows } = await client.query<{ pid: number; session: boolean }>(
      `select pid, backend_type = 'client backend' as session from pg_stat_activity
       where datname = current_database() and (application_name = $1 or application_name like $1 || ':%')`,
      [applicationName],
    );
    for (const { pid } of rows) {
      const used = readable ? cpuTicksOf(pid) : null;
      if (used === null) {
        // A session that ended between the query and the read is gone; one that exists but cannot be read
        // means PostgreSQL runs elsewhere (or as another user whose /proc is closed).
        if (existsSync(`/proc/${pid}`)) readable = false;
        continue;
      }
      const seen = ticks.get(pid);
      if (seen) seen.last = used;
      else ticks.set(pid, { first: used, last: used });
    }
    return rows.filter((row) => row.session).length;
  }, 250).start();
  return {
    async stop() {
      const peakConnections = await sampler.stop();
      await client.end().catch(() => undefined);
      let used = 0;
      for (const { first, last } of ticks.values()) used += last - first;
      return { peakConnections, postgresCpuSeconds: readable && ticks.size > 0 ? used / CLOCK_TICKS : null };
    },
  };
}

/**
 * Another local process's peak resident set size (the kernel's own high-water mark, `VmHWM`, so nothing
 * between two samples is missed) and the CPU time it spent, read from /proc every 100 ms until it exits.
 */
export function processSampler(pid: number): { firstRssMb(): number | null; stop(): Promise<{ peakRssMb: number; cpuSeconds: number }> } {
  let peakKb = 0;
  let firstKb: number | null = null;
  let ticks = 0;
  const started = performance.now();
  const sampler = new PeakSampler(() => {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const hwm = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0);
    const rss = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
    // Its size once started (modules loaded, connected): the last sample of its first second.
    if (firstKb === null || performance.now() - started < 1000) firstKb = rss;
    peakKb = Math.max(peakKb, hwm);
    ticks = cpuTicksOf(pid) ?? ticks;
    return hwm;
  }, 100).start();
  return {
    firstRssMb: () => (firstKb === null ? null : firstKb / 1024),
    async stop() {
      await sampler.stop();
      return { peakRssMb: peakKb / 1024, cpuSeconds: ticks / CLOCK_TICKS };
    },
  };
}

/** Linux's USER_HZ: /proc counts CPU time in hundredths of a second. */
export const CLOCK_TICKS = 100;

/** User + system CPU ticks of a local process, from /proc; null when not readable (another machine, another OS). */
export function cpuTicksOf(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may hold spaces: count fields after its closing one.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return null;
  }
}

/**
 * Starts measuring how idle the machine is (all cores, from /proc/stat: idle and waiting on the disk); the
 * function returned tells the idle share since (0 to 1), null where there is no /proc/stat. A run whose machine
 * had CPU to spare was bound by a wait (a lock, a disk, a queue) or by one thread, not by the machine's CPU.
 */
export function machineIdleSince(): () => number | null {
  const before = machineTicks();
  return () => {
    const after = machineTicks();
    if (!before || !after || after.total <= before.total) return null;
    return (after.idle - before.idle) / (after.total - before.total);
  };
}

/** The idle share as the tables print it. */
export const idlePercent = (share: number) => `${Math.round(share * 100)}% idle`;

function machineTicks(): { idle: number; total: number } | null {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal (guest time is counted in user already)
    const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = fields;
    return { idle: idle + iowait, total: user + nice + system + idle + iowait + irq + softirq + steal };
  } catch {
    return null;
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The last `limit` characters a child process wrote, for an error message. Chunks are kept as they came and
 * joined only when asked: appending each chunk to a string and cutting it back copied the whole tail at every
 * chunk, in the process that also drives the load (a service logging a line a request wrote 2,000 chunks a
 * second, 100 MB a second of copies competing with the service for the machine). `watch` sees each complete
 * line once, until it returns true (the line it waited for, such as the service's `engage listening`).
 */
export class OutputTail {
  private readonly chunks: Buffer[] = [];
  private bytes = 0;
  private unfinishedLine = '';

  constructor(
    private readonly limit = 50_000,
    private watch: ((line: string) => boolean) | null = null,
  ) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.bytes += chunk.length;
    while (this.chunks.length > 1 && this.bytes - this.chunks[0]!.length >= this.limit) this.bytes -= this.chunks.shift()!.length;
    if (!this.watch) return;
    const lines = (this.unfinishedLine + chunk.toString()).split('\n');
    this.unfinishedLine = lines.pop()!;
    for (const line of lines) {
      if (!this.watch(line)) continue;
      this.watch = null;
      this.unfinishedLine = '';
      return;
    }
  }

  text(): string {
    return Buffer.concat(this.chunks).toString().slice(-this.limit);
  }
}

/**
 * Runs `main` when the file is the process's entry point (each benchmark also runs alone, and `run.ts`
 * runs each in a process of its own so its memory is its own): the result goes to BENCH_RESULT_FILE as
 * JSON, or to stdout.
 */
export function runIfMain(moduleUrl: string, main: () => Promise<unknown>): void {
  if (!process.argv[1] || moduleUrl !== pathToFileURL(process.argv[1]).href) return;
  main()
    .then((result) => {
      const json = JSON.stringify(result, null, 2);
      if (process.env.BENCH_RESULT_FILE) writeFileSync(process.env.BENCH_RESULT_FILE, json);
      else console.log(json);
      process.exit(0);
    })
    .catch((error: unknown) => {
      console.error(error);
      process.exit(1);
    });
}

export function formatNumber(value: number, digits = 0): string {
  return Number.isFinite(value) ? value.toLocaleString('en-GB', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : '-';
}

/** The commit the run measures: its short hash, and whether tracked files were changed since. */
export function commitDescription(): string {
  const git = (args: string[]) => {
    try {
      return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    } catch {
      return '';
    }
  };
  const dirty = git(['status', '--porcelain', '--untracked-files=no']) !== '';
  return `${git(['rev-parse', '--short', 'HEAD']) || 'unknown'}${dirty ? ' (with local changes)' : ''}`;
}

/**
 * Replaces what stands between two markers of bench/README.md with `markdown`; does nothing when the file
 * or a marker is missing.
 */
export function replaceReadmeSection(startMark: string, endMark: string, markdown: string, file = 'bench/README.md'): void {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return;
  }
  const start = text.indexOf(startMark);
  const end = text.indexOf(endMark);
  if (start < 0 || end < start) return;
  writeFileSync(file, `${text.slice(0, start + startMark.length)}\n${markdown}\n${text.slice(end)}`);
}
