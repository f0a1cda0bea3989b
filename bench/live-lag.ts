/**
 * Live lag benchmark: a fresh database holding a small programme's set-up (`world.ts`: two organisations,
 * their communities, 200 users, challenges, rewards, leaderboards), with the service's consumers
 * running as the service runs them (one ProjectionRunner over every read model and process manager, default
 * options). Custom events are logged by the use case behind `POST /events/custom` (`logCustomEvent`, for a
 * known user by external id), so the engine engages them and the read models follow its facts. Until
 * 2026-12-06 the bench built the command's parts itself, and without the event's stream marked new it read
 * that stream (empty) before each append: a statement a write that the API does not make.
 *
 * 1. Write capacity: closed loop at concurrency 8 for BENCH_LAG_CAPACITY_S (default 3) seconds → writes/s.
 * 2. Lag: an open loop at half that rate (or BENCH_LAG_RATE writes/s) for BENCH_LAG_SECONDS (default 60)
 *    seconds (each write starts on schedule, whatever the others do); for each write, the time from its
 *    acknowledgement until every live read model's checkpoint has committed past its position (the runner
 *    reports each commit: `onCheckpoint`) → p50, p99, max. Target: p99 <= 100 ms. Throughout, two strangers
 *    hold a writing transaction open: one in another database of the server, one in this database on a table
 *    that is not the event store (once, either stopped every read model for as long as it stayed open). A
 *    write whose lag passes the read-your-writes wait (READ_YOUR_WRITES_TIMEOUT_MS' default, 5 s) would have
 *    been a 503 to a client reading with `x-min-position`: counted. Beside it, one write in 25 is read back as a
 *    client does (`waitForProjections`, the wait behind `x-min-position`, in the service's pool as `ROLE=all`
 *    runs it): the time until that read may go ahead. Until 2026-11-28 one client polled
 *    `projection_generations` every millisecond instead of the runner's reports: under the held transaction
 *    that poll read every dead version of the checkpoint rows and took a quarter of a core on a 2-core machine
 *    (a tenth of all it could do), which lengthened the lag it measured.
 *
 *   npx tsx bench/live-lag.ts
 */
import pg from 'pg';
import type { LogCustomEventBody } from '../api/contract/custom-events.ts';
import type { ServiceContext } from '../api/context.ts';
import { logCustomEvent } from '../command-api/log-custom-event.ts';
import type { CustomEventPayload } from '../domain/custom-event.ts';
import { systemClock } from '../infra/clock.ts';
import { loadConfig } from '../infra/config.ts';
import { openPostgres } from '../infra/database.ts';
import { PostgresEventStore } from '../infra/event-store/postgres.ts';
import { projections } from '../projectors/index.ts';
import { ProjectionRunner, prepareProjections, waitForProjections } from '../projectors/runtime/index.ts';
import { RequestsInFlight } from '../infra/requests-in-flight.ts';
import { migrate } from '../service.ts';
import { writeWorld } from './million-store.ts';
import { connectionSampler, databaseUrl, percentiles, runIfMain, scratchDatabase, silentLogger, sleep, type Percentiles } from './support.ts';

export const LAG_TARGET_P99_MS = 100;

const CONCURRENCY = 8;
const SERVICE_APPLICATION = 'engage-bench-service';
const READER_APPLICATION = 'engage-bench-reader';
/** One write in so many (BENCH_RYW_SAMPLE) is also read back as a client would, with `x-min-position` (the service's own wait). */
const READ_YOUR_WRITES_SAMPLE = Number(process.env.BENCH_RYW_SAMPLE ?? 25);
/** How long a write may take to show in every read model before it counts as lost (and the run fails). */
const SETTLE_TIMEOUT_MS = 60_000;
/** The service's default wait for `x-min-position` (READ_YOUR_WRITES_TIMEOUT_MS) before it answers 503. */
const READ_YOUR_WRITES_WAIT_MS = 5000;

export interface LiveLagResult {
  seedEvents: number;
  /** Events in the log per custom event logged: the event, and what the engine appended for it. */
  eventsPerWrite: number;
  capacity: { writesPerSecond: number; writes: number; seconds: number; ackMs: Percentiles };
  lag: {
    rate: number;
    writes: number;
    seconds: number;
    ackMs: Percentiles;
    lagMs: Percentiles;
    /** Writes the read models had not passed SETTLE_TIMEOUT_MS after the last one (counted at that timeout). */
    unsettled: number;
    /** Seconds the strangers' writing transactions stayed open during the phase (another database, a table of ours). */
    strangersHeldSeconds: number;
    /** Writes that a read with `x-min-position` would have waited for longer than READ_YOUR_WRITES_WAIT_MS (a 503). */
    readYourWrites503: number;
    /**
     * One write in READ_YOUR_WRITES_SAMPLE read back right after its acknowledgement as a client does with
     * `x-min-position` (the service's own wait, in its pool, as `ROLE=all` reads): how long
     * from the acknowledgement until the read could go ahead, and how many would have been a 503.
     */
    readYourWritesReads: { oneIn: number; reads: number; waitMs: Percentiles; timedOut: number };
    /**
     * What the phase cost per write, from its first write until every read model had passed the last one:
     * CPU of this process (the writers, every consumer, the sampled reads) and of its PostgreSQL sessions (null
     * when not readable), and the statements its pool sent, by purpose. A busy machine stretches the lag; it
     * changes these far less, so they compare two versions of the pipeline.
     */
    perWrite: { nodeCpuMs: number; postgresCpuMs: number | null; statements: number; statementsByPurpose: Record<string, number> };
    /**
     * Each read model's own lag (write acknowledged → its checkpoint committed past it), slowest p99 first: which
     * ones the lag above waits for. A read model with nothing to apply for these writes still has to read past them.
     */
    byReadModel: Record<string, Percentiles>;
    /**
     * Write acknowledged → the first page of the shared log that holds it (as the consumers read it): where every
     * read model's lag starts. Reads stop at the oldest appender still running (the horizon), so a process
     * manager's long transaction shows here.
     */
    logVisibleMs: Percentiles;
  };
  readModels: string[];
  targetP99Ms: number;
}

interface Member {
  organisationId: string;
  tokenId: string;
  externalUserId: string;
  communityId: string;
}

export async function benchLiveLag(): Promise<LiveLagResult> {
  const capacitySeconds = Number(process.env.BENCH_LAG_CAPACITY_S ?? 3);
  const lagSeconds = Number(process.env.BENCH_LAG_SECONDS ?? 60);
  const scratch = await scratchDatabase('engage_bench_live');
  // DATABASE_PREPARED_STATEMENTS as the service reads it (to compare a run without named statements).
  const prepared = process.env.DATABASE_PREPARED_STATEMENTS;
  const database = await openPostgres(scratch.url(), {
    max: 10,
    applicationName: SERVICE_APPLICATION,
    preparedStatements: prepared === undefined ? undefined : Number(prepared),
  });
  const statements = new Map<string, number>();
  let countingStatements = false;
  database.observeStatements((purpose) => {
    if (countingStatements) statements.set(purpose, (statements.get(purpose) ?? 0) + 1);
  });
  const store = new PostgresEventStore(database);
  // The use case's context, as the service builds it (its configuration as this database's service would load it).
  const service: ServiceContext = { config: loadConfig({ DATABASE_URL: scratch.url() }), database, store, logger: silentLogger, clock: systemClock };
  // The consumers' reads of the log during the lag phase, as they complete (the runner reads through `store`).
  const logReads: { at: number; checkpoint: string }[] = [];
  let recordingReads = false;
  const readAll = store.readAll.bind(store);
  store.readAll = async (options) => {
    const page = await readAll(options);
    if (recordingReads && page.checkpoint !== null) logReads.push({ at: performance.now(), checkpoint: page.checkpoint });
    return page;
  };
  let runner: ProjectionRunner | null = null;
  // Reads the checkpoints before the lag phase, and counts the log after it.
  const reader = new pg.Client({ connectionString: scratch.url(READER_APPLICATION) });
  reader.on('error', () => undefined);
  const strangers = [
    new pg.Client({ connectionString: databaseUrl('postgres', 'engage-bench-stranger') }),
    new pg.Client({ connectionString: scratch.url('engage-bench-stranger') }),
  ];
  for (const stranger of strangers) stranger.on('error', () => undefined);
  try {
    await migrate(database.db);
    // The programme's set-up only, three days ago (its challenges and leaderboards have started): its custom
    // events are the ones logged below, engaged by the engine running here.
    const seed = await writeWorld(
      scratch.url('engage-bench-generator'),
      1,
      { organisations: 2, users: 400, communitiesPerOrganisation: 3, challengesPerCommunity: 4, leaderboardsPerOrganisation: 8 },
      Date.now() - 3 * 86_400_000,
    );
    const members = await membersOf(store);

    const readModels = projections.filter((consumer) => consumer.kind === 'projection').map((consumer) => consumer.name);
    const isReadModel = new Set(readModels);
    const everyConsumer = projections.map((consumer) => consumer.name);
    // Where each read model's checkpoint stands as readers see it (committed), and the writes not yet passed by all.
    const visible = new Map<string, string | null>();
    const pending: { position: string; ackAt: number }[] = [];
    const lags: number[] = [];
    // The same, read model by read model.
    const ownPending = new Map<string, { position: string; ackAt: number }[]>(readModels.map((name) => [name, []]));
    const ownLags = new Map<string, number[]>(readModels.map((name) => [name, []]));
    const passOwn = (name: string, checkpoint: string | null) => {
      const waiting = ownPending.get(name)!;
      if (checkpoint === null || waiting.length === 0) return;
      const now = performance.now();
      const own = ownLags.get(name)!;
      ownPending.set(
        name,
        waiting.filter((write) => {
          if (write.position > checkpoint) return true;
          own.push(now - write.ackAt);
          return false;
        }),
      );
    };
    const acks: number[] = [];
    const acknowledged: { position: string; ackAt: number }[] = [];
    const readWaits: number[] = [];
    let readTimeouts = 0;
    let watching = false;
    const passVisible = () => {
      if (!watching || visible.size < readModels.length) return;
      let passed: string | null = null;
      for (const checkpoint of visible.values()) {
        if (checkpoint === null) return;
        if (passed === null || checkpoint < passed) passed = checkpoint;
      }
      const now = performance.now();
      for (let i = pending.length - 1; i >= 0; i--) {
        if (pending[i]!.position <= passed!) {
          lags.push(now - pending[i]!.ackAt);
          pending.splice(i, 1);
        }
      }
    };
    const readYourWrites = async (position: string, ackAt: number) => {
      if (await waitForProjections(database.db, readModels, position, READ_YOUR_WRITES_WAIT_MS)) readWaits.push(performance.now() - ackAt);
      else readTimeouts++;
    };

    await prepareProjections(database.db, projections);
    // As the service runs them: batches take at most half the pool, and the writes in flight (the API's requests
    // here) tell the live period whether the process is saturated.
    const writesInFlight = new RequestsInFlight();
    runner = new ProjectionRunner(database, store, projections, silentLogger, {
      concurrency: 5,
      requestsInFlight: () => writesInFlight.meanSinceLastSample(),
      onCheckpoint: (name, _generation, checkpoint) => {
        if (!isReadModel.has(name)) return;
        visible.set(name, checkpoint);
        if (watching) passOwn(name, checkpoint);
        passVisible();
      },
    });
    await runner.start();
    await settled(store, database.db, everyConsumer);

    let written = 0;
    const write = async () => {
      const member = members[written++ % members.length]!;
      const started = performance.now();
      const caller = {
        organisationId: member.organisationId,
        tokenId: member.tokenId,
        metadata: { organisationId: member.organisationId, actor: member.tokenId, occurredAt: new Date().toISOString() },
      };
      writesInFlight.enter();
      const handled = await logCustomEvent(service, caller, customEventOf(member, written)).finally(() => writesInFlight.leave());
      return { position: handled.position!, ackAt: performance.now(), ackMs: performance.now() - started };
    };

    // 1. Capacity: eight writers back to back.
    const capacityAcks: number[] = [];
    const capacityStarted = performance.now();
    const capacityEnd = capacityStarted + capacitySeconds * 1000;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (performance.now() < capacityEnd) capacityAcks.push((await write()).ackMs);
      }),
    );
    const capacityElapsed = (performance.now() - capacityStarted) / 1000;
    const writesPerSecond = capacityAcks.length / capacityElapsed;
    await settled(store, database.db, everyConsumer);

    // 2. Lag at half the capacity, open loop, two strangers' writing transactions open throughout. A write is
    // visible once every read model's checkpoint has committed past it: the runner says when (`onCheckpoint`).
    await reader.connect();
    const [elsewhere, here] = strangers as [pg.Client, pg.Client];
    await Promise.all(strangers.map((stranger) => stranger.connect()));
    await here.query('create table if not exists bench_stranger (n int)');
    await elsewhere.query('begin');
    await elsewhere.query('select pg_current_xact_id()');
    await here.query('begin');
    await here.query('insert into bench_stranger values (1)');
    const strangersSince = performance.now();
    // Half the capacity just measured, unless BENCH_LAG_RATE fixes it (two versions compared at the same load).
    const rate = Number(process.env.BENCH_LAG_RATE ?? 0) || writesPerSecond / 2;
    // Where the read models stood before the phase (a model may not move during it); the runner's reports are newer.
    const rows = (await reader.query(`select name, checkpoint from projection_generations where status = 'live' and name = any($1)`, [readModels])).rows as {
      name: string;
      checkpoint: string | null;
    }[];
    for (const row of rows) if (!visible.has(row.name)) visible.set(row.name, row.checkpoint);
    watching = true;
    recordingReads = true;
    const samples: Promise<void>[] = [];
    const postgresCpu = await connectionSampler(scratch.name, SERVICE_APPLICATION);
    const cpuBefore = process.cpuUsage();
    countingStatements = true;
    const writes: Promise<void>[] = [];
    const total = Math.max(1, Math.round(rate * lagSeconds));
    const scheduleStarted = performance.now();
    for (let i = 0; i < total; i++) {
      const due = scheduleStarted + (i * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      writes.push(
        write().then((ack) => {
          acks.push(ack.ackMs);
          pending.push({ position: ack.position, ackAt: ack.ackAt });
          acknowledged.push({ position: ack.position, ackAt: ack.ackAt });
          for (const name of readModels) {
            ownPending.get(name)!.push({ position: ack.position, ackAt: ack.ackAt });
            passOwn(name, visible.get(name) ?? null);
          }
          passVisible();
          // Now and then, the read a client would make with `x-min-position`, through the service's own wait.
          if (i % READ_YOUR_WRITES_SAMPLE === 0) samples.push(readYourWrites(ack.position, ack.ackAt));
        }),
      );
    }
    await Promise.all(writes);
    const lagElapsed = (performance.now() - scheduleStarted) / 1000;
    const settleDeadline = performance.now() + SETTLE_TIMEOUT_MS;
    while (pending.length > 0 && performance.now() < settleDeadline) await sleep(5);
    await Promise.all(samples);
    countingStatements = false;
    watching = false;
    recordingReads = false;
    const cpu = process.cpuUsage(cpuBefore);
    const { postgresCpuSeconds } = await postgresCpu.stop();
    const strangersHeldSeconds = (performance.now() - strangersSince) / 1000;
    await Promise.all(strangers.map((stranger) => stranger.query('rollback')));
    const unsettled = pending.length;
    for (const { ackAt } of pending) lags.push(performance.now() - ackAt);
    for (const [name, waiting] of ownPending) for (const { ackAt } of waiting) ownLags.get(name)!.push(performance.now() - ackAt);
    // The live reads follow the log, so where they have reached only grows: the first read that reached a write's
    // position, found by a binary search over how far the reads had got (in the order they completed).
    const reached: string[] = [];
    for (const read of logReads) reached.push(reached.length > 0 && reached.at(-1)! > read.checkpoint ? reached.at(-1)! : read.checkpoint);
    const logVisible = acknowledged.flatMap(({ position, ackAt }) => {
      const read = logReads[firstAtOrPast(reached, position)];
      return read ? [Math.max(0, read.at - ackAt)] : [];
    });
    const byReadModel = Object.fromEntries(
      [...ownLags].map(([name, own]) => [name, percentiles(own)] as const).sort(([, a], [, b]) => b.p99 - a.p99 || b.p50 - a.p50),
    );
    await settled(store, database.db, everyConsumer);
    const logged = Number((await reader.query('select count(*) as count from es_events')).rows[0].count);

    return {
      seedEvents: seed.summary.events,
      eventsPerWrite: (logged - seed.summary.events) / written,
      capacity: { writesPerSecond, writes: capacityAcks.length, seconds: capacityElapsed, ackMs: percentiles(capacityAcks) },
      lag: {
        rate,
        writes: total,
        seconds: lagElapsed,
        ackMs: percentiles(acks),
        lagMs: percentiles(lags),
        unsettled,
        strangersHeldSeconds,
        readYourWrites503: lags.filter((lag) => lag > READ_YOUR_WRITES_WAIT_MS).length,
        readYourWritesReads: { oneIn: READ_YOUR_WRITES_SAMPLE, reads: readWaits.length, waitMs: percentiles(readWaits), timedOut: readTimeouts },
        perWrite: {
          nodeCpuMs: (cpu.user + cpu.system) / 1000 / total,
          postgresCpuMs: postgresCpuSeconds === null ? null : (postgresCpuSeconds * 1000) / total,
          statements: [...statements.values()].reduce((sum, count) => sum + count, 0) / total,
          statementsByPurpose: Object.fromEntries([...statements].sort((a, b) => b[1] - a[1]).map(([purpose, count]) => [purpose, count / total])),
        },
        byReadModel,
        logVisibleMs: percentiles(logVisible),
      },
      readModels,
      targetP99Ms: LAG_TARGET_P99_MS,
    };
  } finally {
    await runner?.stop();
    await reader.end().catch(() => undefined);
    await Promise.all(strangers.map((stranger) => stranger.end().catch(() => undefined)));
    await store.close();
    await database.close();
    await scratch.drop();
  }
}

/** The body of `POST /events/custom` for a known user, by the external id a client knows it by. */
function customEventOf(member: Member, n: number): LogCustomEventBody {
  const names = ['check-in', 'page-view', 'purchase', 'video-watched', 'quiz-answer', 'share', 'review'];
  const eventName = names[n % names.length]!;
  const payload: CustomEventPayload =
    eventName === 'purchase'
      ? { amount: 10 + (n % 90), currency: 'EUR' }
      : eventName === 'review'
        ? { rating: 1 + (n % 5) }
        : eventName === 'quiz-answer'
          ? { correct: n % 3 !== 0 }
          : {};
  return { userId: member.externalUserId, communityId: member.communityId, eventName, payload, autoCreateUser: false };
}

/** The seeded users with a community of theirs and their organisation's API token, from the log. */
async function membersOf(store: PostgresEventStore): Promise<Member[]> {
  const tokens = new Map<string, string>();
  const members: Member[] = [];
  for (let after: string | null = null; ;) {
    const page = await store.readAll({ after, limit: 5000, filter: { eventTypes: ['ApiTokenIssued', 'UserCreated'] } });
    for (const event of page.events) {
      const data = event.data as { organisationId: string; tokenId?: string; externalUserId?: string; communityIds?: string[] };
      if (event.type === 'ApiTokenIssued') tokens.set(data.organisationId, data.tokenId!);
      else
        members.push({
          organisationId: data.organisationId,
          tokenId: '',
          externalUserId: data.externalUserId!,
          communityId: data.communityIds![0]!,
        });
    }
    if (page.isEnd) break;
    after = page.checkpoint;
  }
  if (members.length === 0) throw new Error('the seeded programme has no users');
  return members.map((member) => ({ ...member, tokenId: tokens.get(member.organisationId)! }));
}

/** Until every consumer has passed the newest event, including what process managers append meanwhile. */
async function settled(store: PostgresEventStore, db: Parameters<typeof migrate>[0], names: string[]): Promise<void> {
  for (let previous: string | null = null; ;) {
    const head = (await store.head())?.position ?? null;
    if (head === null || head === previous) return;
    if (!(await waitForProjections(db, names, head, 180_000))) throw new Error('the consumers did not catch up with the log in 3 minutes');
    previous = head;
  }
}

runIfMain(import.meta.url, benchLiveLag);

/** The index of the first of `sorted` (ascending) at or past `position`; `sorted.length` when none is. */
function firstAtOrPast(sorted: readonly string[], position: string): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const middle = (low + high) >> 1;
    if (sorted[middle]! >= position) high = middle;
    else low = middle + 1;
  }
  return low;
}
