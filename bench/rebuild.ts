/**
 * Rebuild benchmark on the realistic store (`million-store.ts`): every read model (kind `projection`)
 * rebuilt at once, as `engage projections rebuild --all` does it, against a reference measured in the same
 * run: a keyset read of the whole log in pages of 5,000 (`store.readAll({after, limit: 5000})` to the end).
 *
 * As when a new version of every read model starts in a service that is up to date: the live generations
 * (the previous version, which the rebuild leaves alone) stand at the head of the log; each rebuild fills a
 * building generation from the start of the log and swaps it in once it has reached them. The rebuild runs as
 * an operator runs it: `engage projections rebuild --all` (compiled, `bin/engage.mjs`) in a process of its
 * own, with the service's default pool. Reported: events in the log / wall time until every one has swapped
 * in, and each projection's own swap time, as events/s and as a ratio to the read; that process's peak resident
 * set (the kernel's high-water mark) and CPU time, the peak number of PostgreSQL sessions it held and the CPU
 * time they spent (sampled every 250 ms from a client of this process's own, by application_name): the work,
 * whatever else the machine is doing. `BENCH_PROJECTIONS=a,b` rebuilds only those read models.
 * A rebuild that has not finished after BENCH_REBUILD_TIMEOUT_S (default 300) is reported with its progress.
 *
 *   BENCH_EVENTS=100000 npx tsx bench/rebuild.ts
 */
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { sql } from 'kysely';
import { openPostgres, quoteIdentifier, type UntypedDb } from '../infra/database.ts';
import { PostgresEventStore } from '../infra/event-store/postgres.ts';
import { projections } from '../projectors/index.ts';
import { requestRebuild } from '../projectors/maintenance.ts';
import { prepareProjections } from '../projectors/runtime/index.ts';
import { migrate } from '../service.ts';
import { ensureStore } from './million-store.ts';
import { readFileSync } from 'node:fs';
import { CLOCK_TICKS, connectionSampler, cpuTicksOf, databaseUrl, machineIdleSince, runIfMain, sleep } from './support.ts';

export const REBUILD_TARGETS = { eventsPerSecond: 50_000, ratio: 0.3, slowestRatio: 0.1, peakRssMb: 300 } as const;

const RUNNER_APPLICATION = 'engage-bench-runner';
const SETUP_APPLICATION = 'engage-bench-setup';
const READ_PAGE = 5000;
/** The rebuilding process's pool: the service's `DATABASE_POOL_SIZE` default unless BENCH_POOL_SIZE says otherwise. */
const POOL_SIZE = Number(process.env.BENCH_POOL_SIZE ?? 10);

export interface ProjectionRebuild {
  name: string;
  /** Seconds from the start until its building generation was live; null when it did not finish in time. */
  seconds: number | null;
  /** Events of the log it had passed (all of them once swapped in). */
  processed: number;
  eventsPerSecond: number;
  ratio: number;
  parked: number;
}

export interface RebuildResult {
  database: string;
  events: number;
  /**
   * The read's CPU (this process and its PostgreSQL session) per event, in µs, in its fastest run; null when
   * PostgreSQL's processes cannot be read. Beside the rebuild's CPU per event, a ratio a busy machine disturbs
   * far less than the rates.
   */
  reference: { eventsPerSecond: number; seconds: number; runs: number[]; cpuMicrosPerEvent: number | null };
  rebuild: {
    complete: boolean;
    timeoutSeconds: number;
    seconds: number;
    eventsPerSecond: number;
    ratio: number;
    slowest: { name: string; eventsPerSecond: number; ratio: number };
    peakRssMb: number;
    baselineRssMb: number;
    peakConnections: number;
    /** CPU seconds spent by this process (Node) and by its PostgreSQL backends (null when not readable) while rebuilding. */
    nodeCpuSeconds: number;
    postgresCpuSeconds: number | null;
    /** The machine's idle share (all cores, 0 to 1) while rebuilding: what the rebuild left of the machine unused. */
    machineIdle: number | null;
    parked: number;
    projections: ProjectionRebuild[];
  };
  targets: typeof REBUILD_TARGETS;
}

export async function benchRebuild(): Promise<RebuildResult> {
  const store = await ensureStore();
  const timeoutSeconds = Number(process.env.BENCH_REBUILD_TIMEOUT_S ?? 300);
  const database = await openPostgres(databaseUrl(store.database), { max: 4, applicationName: SETUP_APPLICATION });
  const eventStore = new PostgresEventStore(database);
  const db = database.db;
  try {
    await migrate(db);
    await resetProjections(db);
    const events = await eventStore.countAfter(null);

    // The rebuild a new version causes in a service that is up to date: the live generations (one version
    // behind, so this runner leaves them to the service) stand at the head; a building generation of each
    // read model fills from the start of the log and swaps in once it has reached them.
    const only = process.env.BENCH_PROJECTIONS?.split(',').filter(Boolean);
    const readModels = projections.filter((consumer) => consumer.kind === 'projection' && (!only || only.includes(consumer.name)));
    await prepareProjections(
      db,
      readModels.map((projection) => ({ ...projection, version: projection.version - 1 })),
    );
    const head = (await eventStore.head())!.position;
    await db.updateTable('projection_generations').set({ checkpoint: head }).where('status', '=', 'live').execute();
    const targets = new Map<string, number>();
    for (const projection of readModels) targets.set(projection.name, (await requestRebuild(db, projection)).generation);

    // The rebuild as an operator runs it: `engage projections rebuild --all`, compiled, in a process of its own,
    // whose memory and CPU are then its own (the kernel's high-water mark of its resident set, /proc's CPU time).
    execFileSync(process.execPath, ['bin/build.mjs'], { stdio: 'ignore' });
    // Flags for the rebuilding process's node (a CPU profile, V8's heap sizes), to measure what they change.
    const nodeFlags = process.env.BENCH_REBUILD_NODE_FLAGS?.split(' ').filter(Boolean) ?? [];
    const connections = await connectionSampler(store.database, RUNNER_APPLICATION);
    const machineIdleSoFar = machineIdleSince();
    const started = performance.now();
    // As `npx engage` runs it: the file itself, through its shebang (one node, the heap bound it names); with
    // node flags, `node <flags> bin/engage.mjs` (which starts the rebuild in a bounded node of its own unless a
    // flag bounds the heap).
    const command = nodeFlags.length > 0 ? [process.execPath, ...nodeFlags, 'bin/engage.mjs'] : ['bin/engage.mjs'];
    const child = spawn(
      command[0]!,
      [...command.slice(1), 'projections', 'rebuild', ...(only ? readModels.map((projection) => projection.name) : ['--all']), '--json', '--no-progress'],
      {
        env: {
          ...process.env,
          DATABASE_URL: databaseUrl(store.database),
          DATABASE_POOL_SIZE: String(POOL_SIZE),
          APPLICATION_NAME: RUNNER_APPLICATION,
          LOG_LEVEL: 'silent',
          REDIS_URL: '',
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    let errors = '';
    child.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()));
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    const usage = treeSampler(child.pid!);
    const swappedAt = new Map<string, number>();
    const deadline = started + timeoutSeconds * 1000;
    let exit: [number | null, NodeJS.Signals | null] | null = null;
    void exited.then((code) => (exit = code));
    while (swappedAt.size < targets.size && performance.now() < deadline && exit === null) {
      await sleep(100);
      const live = await db.selectFrom('projection_generations').select(['name', 'generation']).where('status', '=', 'live').execute();
      const now = performance.now();
      for (const row of live) {
        if (targets.get(row.name) === row.generation && !swappedAt.has(row.name)) swappedAt.set(row.name, (now - started) / 1000);
      }
    }
    const seconds = (performance.now() - started) / 1000;
    const machineIdle = machineIdleSoFar();
    // Interrupted like an operator's Ctrl-C when it ran out of time; it resumes from its checkpoints next time.
    if (exit === null && swappedAt.size < targets.size) child.kill('SIGINT');
    const [code, signal] = await exited;
    const { peakRssMb, cpuSeconds } = await usage.stop();
    const baselineRssMb = usage.firstRssMb() ?? 0;
    const { peakConnections, postgresCpuSeconds } = await connections.stop();
    if (code !== 0 && !(code === null && signal === 'SIGINT') && code !== 130)
      throw new Error(`engage projections rebuild exited with ${code ?? signal}: ${errors}`);

    // The reference after the rebuild, so the pages it leaves on the heap do not count in the rebuild's RSS;
    // the log is in the page cache either way (it was just written, or read by an earlier run). Best of two.
    const reads: { seconds: number; cpuSeconds: number | null }[] = [];
    for (let run = 0; run < 2; run++) reads.push(await keysetRead(db, eventStore, events));
    const fastest = reads.reduce((best, read) => (read.seconds < best.seconds ? read : best));
    const runs = reads.map((read) => read.seconds);
    const referenceSeconds = fastest.seconds;
    const reference = events / referenceSeconds;

    const parkedRows = await db
      .selectFrom('projection_parked')
      .select(['name', (eb) => eb.fn.countAll<string>().as('count')])
      .groupBy('name')
      .execute();
    const parkedOf = (name: string) => Number(parkedRows.find((row) => row.name === name)?.count ?? 0);
    const rows: ProjectionRebuild[] = [];
    for (const [name, generation] of targets) {
      const swapped = swappedAt.get(name);
      let processed = events;
      if (swapped === undefined) {
        const row = await db
          .selectFrom('projection_generations')
          .select('checkpoint')
          .where('name', '=', name)
          .where('generation', '=', generation)
          .executeTakeFirst();
        processed = events - (await eventStore.countAfter((row?.checkpoint as string | null | undefined) ?? null));
      }
      const eventsPerSecond = processed / (swapped ?? seconds);
      rows.push({ name, seconds: swapped ?? null, processed, eventsPerSecond, ratio: eventsPerSecond / reference, parked: parkedOf(name) });
    }
    rows.sort((a, b) => a.eventsPerSecond - b.eventsPerSecond);
    const complete = swappedAt.size === targets.size;
    const eventsPerSecond = complete ? events / seconds : Math.min(...rows.map((row) => row.processed)) / seconds;
    const slowest = rows[0]!;
    return {
      database: store.database,
      events,
      reference: {
        eventsPerSecond: reference,
        seconds: referenceSeconds,
        runs,
        cpuMicrosPerEvent: fastest.cpuSeconds === null ? null : (fastest.cpuSeconds * 1e6) / events,
      },
      rebuild: {
        complete,
        timeoutSeconds,
        seconds,
        eventsPerSecond,
        ratio: eventsPerSecond / reference,
        slowest: { name: slowest.name, eventsPerSecond: slowest.eventsPerSecond, ratio: slowest.ratio },
        peakRssMb,
        baselineRssMb,
        peakConnections,
        nodeCpuSeconds: cpuSeconds,
        postgresCpuSeconds,
        machineIdle,
        parked: parkedRows.reduce((sum, row) => sum + Number(row.count), 0),
        projections: rows,
      },
      targets: REBUILD_TARGETS,
    };
  } finally {
    await eventStore.close();
    await database.close();
  }
}

/**
 * The reference: the whole log read in order, a page of 5,000 at a time, as a rebuild's subscription reads it;
 * its time, and the CPU this process and the setup pool's sessions spent on it.
 */
async function keysetRead(db: UntypedDb, store: PostgresEventStore, expected: number): Promise<{ seconds: number; cpuSeconds: number | null }> {
  const sessionsBefore = await setupSessionsCpu(db);
  const cpu = process.cpuUsage();
  const started = performance.now();
  let after: string | null = null;
  let read = 0;
  for (;;) {
    const page = await store.readAll({ after, limit: READ_PAGE });
    read += page.events.length;
    if (page.checkpoint !== null) after = page.checkpoint;
    if (page.isEnd) break;
  }
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  const sessionsAfter = await setupSessionsCpu(db);
  if (read !== expected) throw new Error(`the keyset read saw ${read} events, the log holds ${expected}`);
  if (sessionsBefore === null || sessionsAfter === null) return { seconds, cpuSeconds: null };
  // A session the pool opened meanwhile spent all it has on the read; one it closed was idle.
  let sessions = 0;
  for (const [pid, ticks] of sessionsAfter) sessions += ticks - (sessionsBefore.get(pid) ?? 0);
  return { seconds, cpuSeconds: (used.user + used.system) / 1e6 + sessions / CLOCK_TICKS };
}

/** CPU ticks of each PostgreSQL session of the setup pool (the keyset read's); null when /proc cannot tell. */
async function setupSessionsCpu(db: UntypedDb): Promise<Map<number, number> | null> {
  const { rows } = await sql<{ pid: number }>`
    select pid from pg_stat_activity where datname = current_database() and application_name = ${SETUP_APPLICATION}`.execute(db);
  const ticks = new Map<number, number>();
  for (const { pid } of rows) {
    const used = cpuTicksOf(pid);
    if (used === null) return null;
    ticks.set(pid, used);
  }
  return ticks;
}

/**
 * The peak resident set and CPU time of a process and its descendants (run with node flags, `bin/engage.mjs`
 * starts the rebuild in a node of its own): the sum of each one's high-water mark (VmHWM, the kernel's, so a peak between samples
 * counts), an upper bound of what they held at once; CPU time of each as last seen. Sampled every 100 ms.
 */
function treeSampler(root: number): { firstRssMb(): number | null; stop(): Promise<{ peakRssMb: number; cpuSeconds: number }> } {
  const seen = new Map<number, { hwmKb: number; ticks: number }>();
  let firstKb: number | null = null;
  const started = performance.now();
  const tree = (pid: number): number[] => {
    try {
      const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter(Boolean).map(Number);
      return [pid, ...children.flatMap(tree)];
    } catch {
      return [];
    }
  };
  const sample = () => {
    let rssKb = 0;
    for (const pid of tree(root)) {
      try {
        const status = readFileSync(`/proc/${pid}/status`, 'utf8');
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        const hwmKb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0);
        rssKb += Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
        seen.set(pid, { hwmKb: Math.max(hwmKb, seen.get(pid)?.hwmKb ?? 0), ticks: Number(fields[11]) + Number(fields[12]) });
      } catch {
        // Gone meanwhile: its last sample stands.
      }
    }
    // Its size once started (modules loaded, connected): the last sample of its first second.
    if (firstKb === null || performance.now() - started < 1000) firstKb = rssKb;
  };
  sample();
  const timer = setInterval(sample, 100);
  return {
    firstRssMb: () => (firstKb === null ? null : firstKb / 1024),
    async stop() {
      clearInterval(timer);
      const all = [...seen.values()];
      return { peakRssMb: all.reduce((sum, one) => sum + one.hwmKb, 0) / 1024, cpuSeconds: all.reduce((sum, one) => sum + one.ticks, 0) / 100 };
    },
  };
}

/** A clean slate on a reused store: no generation, no parked event, no view left from an earlier run. */
async function resetProjections(db: Parameters<typeof migrate>[0]): Promise<void> {
  const schemas = await sql<{ name: string }>`select nspname as name from pg_namespace where nspname like 'rm\\_%'`.execute(db);
  for (const { name } of schemas.rows) await sql.raw(`drop schema ${quoteIdentifier(name)} cascade`).execute(db);
  await db.deleteFrom('projection_generations').execute();
  await db.deleteFrom('projection_parked').execute();
}

runIfMain(import.meta.url, benchRebuild);
