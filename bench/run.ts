/**
 * `npm run bench`: every benchmark, each in a process of its own (so its memory is its own and a crash is
 * reported, not fatal), then one table on stdout, the JSON results in `bench/results/latest.json` (and a
 * dated copy) and the table in `bench/README.md`, between its results markers. Targets missed are printed,
 * not failed; the run exits non-zero only when a benchmark crashed.
 *
 *   npm run bench                                  # the realistic store of 1,000,000 events (built once, reused)
 *   BENCH_EVENTS=100000 npm run bench              # a quick run on a store of 100,000
 *   BENCH_DATABASE_URL=postgres://... npm run bench
 *
 * See bench/README.md for every setting.
 */
import { execSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import type { EventStoreResult } from './event-store.ts';
import type { LiveLagResult } from './live-lag.ts';
import type { StoreInfo } from './million-store.ts';
import type { RebuildResult } from './rebuild.ts';
import { adminClient, formatNumber, idlePercent, replaceReadmeSection } from './support.ts';
import { README_END as WRITE_END, README_START as WRITE_START, writePathReport, type WritePathResult } from './write-path.ts';

interface Outcome<T> {
  result?: T;
  error?: string;
  seconds: number;
}

const README = 'bench/README.md';
const START_MARK = '<!-- bench:results:start -->';
const END_MARK = '<!-- bench:results:end -->';

/** Runs one benchmark file in a child process; its result comes back through a JSON file. */
function runChild<T>(title: string, file: string, options: { regenerate?: boolean } = {}): Promise<Outcome<T>> {
  console.log(`\n=== ${title} (${file})\n`);
  const resultFile = join(tmpdir(), `engage-bench-${process.pid}-${file.replace(/\W/g, '_')}.json`);
  rmSync(resultFile, { force: true });
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', file], {
      stdio: ['ignore', 'inherit', 'inherit'],
      env: childEnvironment(resultFile, options.regenerate ?? false),
    });
    child.on('error', (error) => resolve({ error: String(error), seconds: (performance.now() - started) / 1000 }));
    child.on('exit', (code, signal) => {
      const seconds = (performance.now() - started) / 1000;
      if (code !== 0) return resolve({ error: `exited with ${signal ?? `code ${code}`}`, seconds });
      try {
        resolve({ result: JSON.parse(readFileSync(resultFile, 'utf8')) as T, seconds });
      } catch (error) {
        resolve({ error: `no result: ${String(error)}`, seconds });
      } finally {
        rmSync(resultFile, { force: true });
      }
    });
  });
}

/** Only the store step may build the store again (BENCH_REGENERATE): the rebuild then finds it complete. */
function childEnvironment(resultFile: string, regenerate: boolean): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, BENCH_RESULT_FILE: resultFile };
  if (!regenerate) delete env.BENCH_REGENERATE;
  return env;
}

async function main(): Promise<void> {
  const started = performance.now();
  const eventStore = await runChild<EventStoreResult>('Event store and engine', 'bench/event-store.ts');
  const store = await runChild<StoreInfo>('The realistic store', 'bench/million-store.ts', { regenerate: true });
  const rebuild = store.result ? await runChild<RebuildResult>('Rebuild of every read model', 'bench/rebuild.ts') : { error: 'no store', seconds: 0 };
  const lag = await runChild<LiveLagResult>('Live lag', 'bench/live-lag.ts');
  const writePath = await runChild<WritePathResult>('Write path', 'bench/write-path.ts');
  const totalSeconds = (performance.now() - started) / 1000;

  const context = await runContext(totalSeconds);
  const markdown = report(context, eventStore, store, rebuild, lag);
  const writeMarkdown = writePath.result ? writePathReport(writePath.result) : `Write path: ${failed(writePath)}`;
  console.log(`\n${markdown}\n\n${writeMarkdown}\n`);

  const results = { ...context, eventStore, store, rebuild, lag, writePath };
  mkdirSync('bench/results', { recursive: true });
  writeFileSync('bench/results/latest.json', JSON.stringify(results, null, 2));
  writeFileSync(`bench/results/bench-${context.date.replaceAll(':', '-')}.json`, JSON.stringify(results, null, 2));
  replaceReadmeSection(START_MARK, END_MARK, markdown);
  replaceReadmeSection(WRITE_START, WRITE_END, writeMarkdown);
  console.log(`Results: bench/results/latest.json; table: ${README}. Total ${totalSeconds.toFixed(0)} s.`);
  const crashed = [eventStore, store, rebuild, lag, writePath].filter((outcome) => outcome.error);
  // A write-path mode that could not run (its service did not start) crashed too; missed targets did not.
  if (writePath.result?.modes.some((mode) => mode.error)) crashed.push(writePath);
  if (crashed.length > 0) process.exitCode = 1;
}

interface RunContext {
  date: string;
  commit: string;
  machine: string;
  postgres: string;
  events: number;
  totalSeconds: number;
}

async function runContext(totalSeconds: number): Promise<RunContext> {
  const git = (command: string) => {
    try {
      return execSync(command, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    } catch {
      return '';
    }
  };
  const dirty = git('git status --porcelain --untracked-files=no') !== '';
  let postgres = 'unknown';
  try {
    const admin = await adminClient();
    postgres = String((await admin.query('show server_version')).rows[0].server_version);
    await admin.end();
  } catch {
    // reported as unknown
  }
  const cpu = cpus();
  return {
    date: new Date().toISOString().slice(0, 19) + 'Z',
    commit: `${git('git rev-parse --short HEAD') || 'unknown'}${dirty ? ' (with local changes)' : ''}`,
    machine: `${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${Math.round(totalmem() / 2 ** 30)} GB`,
    postgres,
    events: Number(process.env.BENCH_EVENTS ?? 1_000_000),
    totalSeconds,
  };
}

const n = (value: number, digits = 0) => formatNumber(value, digits);
const x = (ratio: number) => (Number.isFinite(ratio) ? `${ratio.toFixed(ratio < 0.1 ? 3 : 2)}×` : '-');
const met = (ok: boolean) => (ok ? 'met' : '**missed**');
const failed = (outcome: Outcome<unknown>) => `failed: ${outcome.error}`;

function report(
  context: RunContext,
  eventStore: Outcome<EventStoreResult>,
  store: Outcome<StoreInfo>,
  rebuild: Outcome<RebuildResult>,
  lag: Outcome<LiveLagResult>,
): string {
  const rows: string[][] = [];
  const es = eventStore.result;
  if (es) {
    const appendRow = (label: string, r: EventStoreResult['reference']) => [
      label,
      `${n(r.perSecond)} appends/s (p50 ${n(r.p50, 1)} ms, p99 ${n(r.p99, 1)} ms)`,
      `raw insert ${n(es.reference.perSecond)}/s`,
      x(r.perSecond / es.reference.perSecond),
      '',
    ];
    rows.push(appendRow(`Append, new stream (${n(es.appends)}, concurrency ${es.concurrency})`, es.newStreams));
    rows.push(appendRow('Append, existing stream (expected revision)', es.hotStreams));
    rows.push(appendRow('Append, two new streams at once (multi-stream)', es.multiStream));
    rows.push([`Projection catch-up (${es.projection.name}, ${n(es.projection.applied)} applied)`, `${n(es.projection.eventsPerSecond)} events/s`, '', '', '']);
    rows.push([
      `Engine: ${n(es.engine.engaged)} custom events engaged (${n(es.engine.facts)} facts)`,
      `${n(es.engine.eventsPerSecond)} events/s`,
      `raw, same rows ${n(es.engine.referenceEventsPerSecond)}/s`,
      x(es.engine.ratio),
      '',
    ]);
  } else rows.push(['Event store and engine', failed(eventStore), '', '', '']);

  const info = store.result;
  if (info) {
    rows.push([
      `Realistic store: ${n(info.events)} events (${n(info.summary.organisations)} organisations, ${n(info.summary.users)} users, ${n(info.summary.customEvents)} custom events)`,
      `${info.reused ? 'reused; ' : ''}built in ${n(info.generationSeconds, 1)} s (${n(info.cpuSeconds, 1)} s of CPU)${info.reused ? ` on ${info.generatedAt.slice(0, 10)}` : ''}`,
      '',
      '',
      `< 120 s: ${met(info.generationSeconds < 120)}`,
    ]);
  } else rows.push(['Realistic store', failed(store), '', '', '']);

  const rb = rebuild.result;
  const perProjection: string[][] = [];
  if (rb) {
    const r = rb.rebuild;
    const t = rb.targets;
    rows.push(['Keyset read of the whole log, pages of 5,000 (reference)', `${n(rb.reference.eventsPerSecond)} events/s`, '', '1.00×', '']);
    rows.push([
      `Rebuild of all ${r.projections.length} read models at once${r.complete ? '' : ` (**unfinished after ${r.timeoutSeconds} s**)`}`,
      `${n(r.eventsPerSecond)} events/s (${n(r.seconds, 1)} s)`,
      'keyset read',
      x(r.ratio),
      `≥ ${n(t.eventsPerSecond)}/s and ≥ ${t.ratio}×: ${met(r.complete && r.eventsPerSecond >= t.eventsPerSecond && r.ratio >= t.ratio)}`,
    ]);
    rows.push([
      `Slowest read model (${r.slowest.name})`,
      `${n(r.slowest.eventsPerSecond)} events/s`,
      'keyset read',
      x(r.slowest.ratio),
      `≥ ${t.slowestRatio}×: ${met(r.complete && r.slowest.ratio >= t.slowestRatio)}`,
    ]);
    rows.push([
      'Peak RSS of the rebuilding process',
      `${n(r.peakRssMb)} MB (${n(r.baselineRssMb)} MB at its start)`,
      '',
      '',
      `≤ ${t.peakRssMb} MB: ${met(r.peakRssMb <= t.peakRssMb)}`,
    ]);
    rows.push(['Peak PostgreSQL connections of the rebuilding process', n(r.peakConnections), '', '', '']);
    const rebuildCpu = ((r.nodeCpuSeconds + (r.postgresCpuSeconds ?? 0)) * 1e6) / rb.events;
    const readCpu = rb.reference.cpuMicrosPerEvent;
    rows.push([
      'CPU time of the rebuild: the process (Node) and its PostgreSQL sessions',
      `${r.nodeCpuSeconds.toFixed(1)} s + ${r.postgresCpuSeconds === null ? 'n/a' : `${r.postgresCpuSeconds.toFixed(1)} s`}: ${n(rebuildCpu)} µs of CPU per event` +
        (r.machineIdle === null ? '' : `; the machine ${idlePercent(r.machineIdle)} meanwhile`),
      readCpu === null ? '' : `keyset read ${n(readCpu, 1)} µs per event`,
      // The read's CPU per event over the rebuild's: their cost ratio, which a busy machine disturbs far less than the rates.
      readCpu === null || r.postgresCpuSeconds === null ? '' : `${x(readCpu / rebuildCpu)} (CPU)`,
      '',
    ]);
    rows.push(['Events parked by the rebuild', n(r.parked), '', '', `0: ${met(r.parked === 0)}`]);
    for (const p of [...r.projections].sort((a, b) => (a.seconds ?? Infinity) - (b.seconds ?? Infinity))) {
      perProjection.push([
        p.name,
        p.seconds === null ? `not yet (${n((100 * p.processed) / rb.events)}% after ${n(r.seconds)} s)` : `${n(p.seconds, 1)} s`,
        n(p.eventsPerSecond),
        x(p.ratio),
        n(p.parked),
      ]);
    }
  } else rows.push(['Rebuild of every read model', failed(rebuild), '', '', '']);

  const lr = lag.result;
  if (lr) {
    rows.push([
      `Write capacity: custom events logged at concurrency 8, consumers running (${n(lr.eventsPerWrite, 1)} events in the log per write with the engine's)`,
      `${n(lr.capacity.writesPerSecond)} writes/s (p50 ${n(lr.capacity.ackMs.p50, 1)} ms, p99 ${n(lr.capacity.ackMs.p99, 1)} ms)`,
      '',
      '',
      '',
    ]);
    rows.push([
      `Live lag, write acknowledged → every read model's checkpoint committed past it (${n(lr.lag.rate, 1)} writes/s for ${n(lr.lag.seconds)} s)`,
      `p50 ${n(lr.lag.lagMs.p50)} ms, p99 ${n(lr.lag.lagMs.p99)} ms, max ${n(lr.lag.lagMs.max)} ms${lr.lag.unsettled ? `, ${lr.lag.unsettled} never` : ''}`,
      '',
      '',
      `p99 ≤ ${lr.targetP99Ms} ms: ${met(lr.lag.unsettled === 0 && lr.lag.lagMs.p99 <= lr.targetP99Ms)}`,
    ]);
    const perWrite = lr.lag.perWrite;
    rows.push([
      'CPU and statements per write during that phase (this process: writers, every consumer, the sampled reads; and its PostgreSQL sessions)',
      `${n(perWrite.nodeCpuMs, 2)} ms Node + ${perWrite.postgresCpuMs === null ? 'n/a' : `${n(perWrite.postgresCpuMs, 2)} ms`} PostgreSQL; ${n(perWrite.statements, 1)} statements (${Object.entries(
        perWrite.statementsByPurpose,
      )
        .slice(0, 4)
        .map(([purpose, count]) => `${purpose} ${n(count, 1)}`)
        .join(', ')})`,
      '',
      '',
      '',
    ]);
    rows.push([
      'A write reaching the shared log during that phase (acknowledged → the first page the consumers read that holds it), where every read model’s lag starts',
      `p50 ${n(lr.lag.logVisibleMs.p50)} ms, p99 ${n(lr.lag.logVisibleMs.p99)} ms, max ${n(lr.lag.logVisibleMs.max)} ms`,
      '',
      '',
      '',
    ]);
    rows.push([
      "Slowest read models during that phase, each one's own lag (write acknowledged → its checkpoint committed past it)",
      Object.entries(lr.lag.byReadModel)
        .slice(0, 5)
        .map(([name, own]) => `${name} p50 ${n(own.p50)} / p99 ${n(own.p99)} ms`)
        .join('; '),
      '',
      '',
      '',
    ]);
    const reads = lr.lag.readYourWritesReads;
    rows.push([
      `Read-your-writes as a client waits for it: one write in ${n(reads.oneIn)} read back with \`x-min-position\` (the service's wait) right after its acknowledgement`,
      `${n(reads.reads)} reads: ready after p50 ${n(reads.waitMs.p50)} ms, p99 ${n(reads.waitMs.p99)} ms; ${n(reads.timedOut)} would have been a 503`,
      '',
      '',
      '',
    ]);
    rows.push([
      `Read-your-writes during that phase, with a writing transaction held open in another database and one on a table of ours outside the event store (${n(lr.lag.strangersHeldSeconds)} s)`,
      `${n(lr.lag.readYourWrites503)} writes a read with \`x-min-position\` would have waited for more than 5 s (a 503)`,
      '',
      '',
      `0 while held ≥ 60 s: ${met(lr.lag.readYourWrites503 === 0 && lr.lag.unsettled === 0 && lr.lag.strangersHeldSeconds >= 60)}`,
    ]);
  } else rows.push(['Live lag', failed(lag), '', '', '']);

  const lines = [
    `Run ${context.date} at commit ${context.commit}; ${context.machine}; PostgreSQL ${context.postgres}; BENCH_EVENTS=${context.events}; \`npm run bench\` took ${n(context.totalSeconds)} s.`,
    '',
    table(['Benchmark', 'Result', 'Reference', 'Ratio', 'Target'], rows),
  ];
  if (perProjection.length > 0) {
    lines.push('', 'Rebuild, per read model (events/s: events in the log / time until its new generation was live):', '');
    lines.push(table(['Read model', 'Live after', 'Events/s', 'Ratio to the read', 'Parked'], perProjection));
  }
  return lines.join('\n');
}

function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.map((cell) => cell.replaceAll('|', '\\|')).join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

await main();
