import type { Job, Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { sql, type Kysely, type Migration } from 'kysely';
import { withLogContext, type Logger } from './logging.ts';
import { activeTraceContext, activeTraceId, traceJob } from './tracing.ts';

/**
 * Timed and outside work (DESIGN §4). The durable record of due work is the `scheduled_jobs` table in
 * PostgreSQL, filled by process managers as they read the event stream (a deterministic job id per piece
 * of work, so re-reading the stream schedules nothing twice). Delivery: with Redis, BullMQ (job id = the
 * row's id, so re-enqueueing after a Redis that lost its data is harmless); without, an in-process poller
 * over the same table. Either way a job is marked done in PostgreSQL once its handler succeeded; handlers
 * make their effects idempotent (deterministic event ids), because a crash between effect and mark
 * repeats the job.
 */
export const jobMigrations: Record<string, Migration> = {
  '0001_scheduled_jobs': {
    async up(db) {
      await db.schema
        .createTable('scheduled_jobs')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('organisation_id', 'text')
        .addColumn('payload', 'jsonb', (c) => c.notNull())
        .addColumn('due_at', 'timestamptz', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull().defaultTo('pending'))
        .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('locked_until', 'timestamptz')
        .addColumn('last_error', 'text')
        .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .addColumn('completed_at', 'timestamptz')
        .execute();
      await sql`create index scheduled_jobs_due on scheduled_jobs (due_at) where status = 'pending'`.execute(db);
    },
  },
  // The W3C trace context of the span that scheduled the job (infra/tracing.ts), null when tracing was off.
  '0002_scheduled_jobs_trace_context': {
    async up(db) {
      await db.schema.alterTable('scheduled_jobs').addColumn('trace_context', 'jsonb').execute();
    },
  },
};

export interface DueJob {
  /** Deterministic: the same piece of work always gets the same id. */
  id: string;
  kind: string;
  organisationId?: string;
  payload: Record<string, unknown>;
  dueAt: Date | string;
}

/**
 * Records due work. Called by process managers inside their batch transaction (pass the transaction), so
 * the job is scheduled exactly when the event that asks for it is projected. Scheduling twice is a no-op.
 */
export async function scheduleJob(db: Kysely<any>, job: DueJob): Promise<void> {
  await scheduleJobs(db, [job]);
}

/** Records several jobs in one statement (a batch that asks for many), each as `scheduleJob` would. */
export async function scheduleJobs(db: Kysely<any>, jobs: readonly DueJob[]): Promise<void> {
  if (jobs.length === 0) return;
  // A job continues the trace of the batch that scheduled it (nothing when tracing is off).
  const traceContext = activeTraceContext();
  await db
    .withSchema('public')
    .insertInto('scheduled_jobs')
    .values(
      jobs.map((job) => ({
        id: job.id,
        kind: job.kind,
        organisation_id: job.organisationId ?? null,
        payload: JSON.stringify(job.payload),
        due_at: new Date(job.dueAt).toISOString(),
        ...(traceContext ? { trace_context: JSON.stringify(traceContext) } : {}),
      })),
    )
    .onConflict((oc) => oc.column('id').doNothing())
    .execute();
}

/** Thrown by a handler that ran too early (a settlement delay, say): the job is due again at `until`, no attempt spent. */
export class JobNotDueYet extends Error {
  constructor(readonly until: Date) {
    super(`not due until ${until.toISOString()}`);
    this.name = 'JobNotDueYet';
  }
}

export interface JobContext {
  jobId: string;
  attempt: number;
}

export type JobHandler = (payload: any, context: JobContext) => Promise<void>;

export interface JobRunnerOptions {
  /** How often due work is looked for (the embedded poller; the Redis feeder). */
  pollMs?: number;
  /** Attempts before a job is marked failed. */
  maxAttempts?: number;
  /** Delay before a failed attempt is retried, times the attempt number. */
  backoffMs?: number;
  /** The clock: tests move it instead of sleeping. */
  now?: () => Date;
  /** BullMQ queue name: one per database, so services on other databases sharing a Redis never take each other's jobs. */
  queueName?: string;
  /** How long a claim holds a job: a worker that died holding one gives it up after this (tests shorten it). */
  claimMs?: number;
}

export interface JobRunner {
  start(): Promise<void>;
  /** Runs everything due now, once, and resolves when it has (tests and the CLI use it). */
  runDue(): Promise<number>;
  stop(): Promise<void>;
}

interface JobRow {
  id: string;
  kind: string;
  organisation_id: string | null;
  payload: Record<string, unknown>;
  due_at: Date;
  attempts: number;
  trace_context: Record<string, unknown> | null;
  /** The claim this worker holds: until then no other worker takes the job. */
  locked_until: Date;
}

/**
 * Claims one due job (a specific one, or the oldest due) for a while, in one statement, so no transaction
 * stays open while the handler works; a claim that outlives a crashed worker lapses and the job runs again.
 */
async function claim(db: Kysely<any>, now: Date, claimMs: number, id?: string): Promise<JobRow | undefined> {
  const result = await sql<JobRow>`
    update scheduled_jobs set locked_until = ${new Date(now.getTime() + claimMs).toISOString()}::timestamptz
    where id = (
      select id from scheduled_jobs
      where status = 'pending' and due_at <= ${now.toISOString()}::timestamptz
        and (locked_until is null or locked_until < ${now.toISOString()}::timestamptz)
        ${id === undefined ? sql`` : sql`and id = ${id}`}
      order by due_at limit 1 for update skip locked)
    returning id, kind, organisation_id, payload, due_at, attempts, trace_context, locked_until`.execute(db);
  return result.rows[0];
}

/**
 * Runs one claimed job and records the outcome; a job whose handler keeps failing ends `failed` with its error.
 * Every line logged meanwhile names the job and its organisation; with tracing on, the run is a span in the
 * trace that scheduled it.
 */
function execute(db: Kysely<any>, handlers: Record<string, JobHandler>, row: JobRow, options: Required<JobRunnerOptions>, logger: Logger): Promise<void> {
  const attempt = row.attempts + 1;
  const job = { id: row.id, kind: row.kind, attempt, organisationId: row.organisation_id, traceContext: row.trace_context };
  return traceJob(job, () => {
    const traceId = activeTraceId();
    const bindings = {
      jobId: row.id,
      kind: row.kind,
      ...(row.organisation_id ? { organisationId: row.organisation_id } : {}),
      ...(traceId ? { traceId } : {}),
    };
    return withLogContext(bindings, () => run(db, handlers, row, attempt, options, logger));
  });
}

async function run(db: Kysely<any>, handlers: Record<string, JobHandler>, row: JobRow, attempt: number, options: Required<JobRunnerOptions>, logger: Logger) {
  const handler = handlers[row.kind];
  try {
    if (!handler) throw new Error(`no handler for job kind ${row.kind}`);
    await handler(row.payload, { jobId: row.id, attempt });
    await db
      .updateTable('scheduled_jobs')
      .set({ status: 'done', attempts: attempt, completed_at: sql`now()`, last_error: null, locked_until: null })
      .where('id', '=', row.id)
      .execute();
  } catch (error) {
    // Only while this worker still holds its claim: once it lapsed, another worker may have taken the job
    // over (and be running it, or have finished it), and that worker records the outcome; a late failure
    // here would clear its claim, reschedule a job that may be done, or mark a done job failed.
    const holdingClaim = (update: { due_at?: string; attempts?: number; last_error?: string; status?: string }) =>
      db
        .updateTable('scheduled_jobs')
        .set({ ...update, locked_until: null })
        .where('id', '=', row.id)
        .where('status', '=', 'pending')
        .where('locked_until', '=', row.locked_until)
        .executeTakeFirst()
        .then((result) => {
          if (result.numUpdatedRows === 0n)
            logger.warn({ jobId: row.id, kind: row.kind, attempt }, 'job outcome not recorded: its claim lapsed and the job was taken over');
        });
    if (error instanceof JobNotDueYet) return holdingClaim({ due_at: error.until.toISOString() });
    const failed = attempt >= options.maxAttempts;
    logger[failed ? 'error' : 'warn']({ err: error, jobId: row.id, kind: row.kind, attempt }, failed ? 'job failed for good' : 'job failed; will retry');
    await holdingClaim({
      attempts: attempt,
      last_error: error instanceof Error ? error.message : String(error),
      ...(failed ? { status: 'failed' } : { due_at: new Date(options.now().getTime() + options.backoffMs * attempt).toISOString() }),
    });
  }
}

/** Runs every job due now, one claim at a time; resolves with how many ran. */
async function runAllDue(db: Kysely<any>, handlers: Record<string, JobHandler>, options: Required<JobRunnerOptions>, logger: Logger): Promise<number> {
  let ran = 0;
  for (let row = await claim(db, options.now(), options.claimMs); row; row = await claim(db, options.now(), options.claimMs)) {
    await execute(db, handlers, row, options, logger);
    ran++;
  }
  return ran;
}

function withDefaults(options: JobRunnerOptions): Required<JobRunnerOptions> {
  return {
    pollMs: options.pollMs ?? 500,
    maxAttempts: options.maxAttempts ?? 5,
    backoffMs: options.backoffMs ?? 5000,
    now: options.now ?? (() => new Date()),
    queueName: options.queueName ?? 'engage-jobs',
    claimMs: options.claimMs ?? 5 * 60_000,
  };
}

/** Embedded mode: a poller in this process claims due rows and runs their handlers. */
export function inProcessJobRunner(db: Kysely<any>, handlers: Record<string, JobHandler>, logger: Logger, options: JobRunnerOptions = {}): JobRunner {
  const settings = withDefaults(options);
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<number> | null = null;
  const runDueOnce = () => runAllDue(db, handlers, settings, logger);

  const runner: JobRunner = {
    start() {
      timer = setInterval(() => void runner.runDue().catch((error) => logger.error({ err: error }, 'job poll failed')), settings.pollMs);
      return Promise.resolve();
    },
    runDue() {
      running ??= runDueOnce().finally(() => (running = null));
      return running;
    },
    async stop() {
      if (timer) clearInterval(timer);
      await running;
    },
  };
  return runner;
}

/**
 * Server mode: a feeder moves due-soon rows into BullMQ (job id = row id, delay until due) and a BullMQ
 * worker runs them. At start-up the feeder re-derives everything pending, so Redis can lose its data.
 */
export function bullmqJobRunner(
  db: Kysely<any>,
  redis: Redis,
  handlers: Record<string, JobHandler>,
  logger: Logger,
  options: JobRunnerOptions = {},
): JobRunner {
  const settings = withDefaults(options);
  // Loaded only where Redis is configured: BullMQ takes a large part of a start's module loading.
  const bullmq = import('bullmq');
  // BullMQ does not close connections it was given: these are ours to close on stop.
  const queueConnection = redis.duplicate();
  const workerConnection = redis.duplicate();
  let queue: Promise<Queue> | null = null;
  const queueOf = () =>
    (queue ??= bullmq.then(({ Queue }) => {
      const opened = new Queue(settings.queueName, { connection: queueConnection });
      opened.on('error', (error) => logger.warn({ err: error }, 'job queue error'));
      return opened;
    }));
  let worker: Worker | null = null;
  let timer: NodeJS.Timeout | null = null;
  let feeding: Promise<number> | null = null;
  const horizonMs = 60_000;

  async function feed(): Promise<number> {
    const now = settings.now().toISOString();
    // Claimed rows wait: their worker finishes them, or dies and its claim lapses, and then they are fed again.
    const due = (await db
      .selectFrom('scheduled_jobs')
      .select(['id', 'kind', 'due_at', 'attempts', 'locked_until'])
      .where('status', '=', 'pending')
      .where('due_at', '<=', new Date(settings.now().getTime() + horizonMs).toISOString() as any)
      .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<', now as any)]))
      .orderBy('due_at')
      .limit(1000)
      .execute()) as (Pick<JobRow, 'id' | 'kind' | 'due_at' | 'attempts'> & { locked_until: Date | null })[];
    if (due.length === 0) return 0;
    const jobs = await queueOf();
    for (const row of due) {
      const nowMs = settings.now().getTime();
      const dueMs = new Date(row.due_at).getTime();
      const delay = Math.max(0, dueMs - nowMs);
      // One BullMQ job per attempt, due time, lapsed claim and hand-over: adding it again is ignored; a retry,
      // or a job whose worker died holding it (its BullMQ copy may be spent already), gets a fresh one.
      // A copy can also be spent without the row ever being claimed: a worker died between taking it and
      // claiming the row (BullMQ hands it on only after its lock lapses and two stalled checks, a minute or
      // more), or the claim failed (BullMQ keeps the copy as failed, so the same id is never added again).
      // So a row that has waited a claim's length for a claim is handed over again, under a new id; a copy
      // too many finds nothing to claim. (BullMQ refuses ':' in its ids, which ours may contain.)
      const lapsed = row.locked_until === null ? 0 : new Date(row.locked_until).getTime();
      const handOver = Math.floor(Math.max(0, nowMs - Math.max(dueMs, lapsed)) / settings.claimMs);
      const jobId = `${encodeURIComponent(row.id)}--${row.attempts}--${dueMs}--${lapsed}--${handOver}`;
      await jobs.add(row.kind, { id: row.id }, { jobId, delay, removeOnComplete: 1000, removeOnFail: 1000 });
    }
    return due.length;
  }

  const feedOnce = () => (feeding ??= feed().finally(() => (feeding = null)));

  async function process(job: Job<{ id: string }>): Promise<void> {
    // Claimed by id: a copy delivered twice, or one that runDue already ran, finds nothing to do.
    const row = await claim(db, settings.now(), settings.claimMs, job.data.id);
    if (row) await execute(db, handlers, row, settings, logger);
  }

  return {
    async start() {
      const { Worker } = await bullmq;
      worker = new Worker(settings.queueName, process, { connection: workerConnection, concurrency: 4 });
      worker.on('error', (error) => logger.error({ err: error }, 'job worker error'));
      await feed();
      // One feed at a time: while Redis is away a feed waits for it, and the next ticks must not pile up behind it.
      timer = setInterval(() => void feedOnce().catch((error) => logger.error({ err: error }, 'job feed failed')), settings.pollMs);
    },
    async runDue() {
      await feedOnce();
      return runAllDue(db, handlers, settings, logger);
    },
    async stop() {
      if (timer) clearInterval(timer);
      await worker?.close();
      if (queue) await (await queue).close();
      queueConnection.disconnect();
      workerConnection.disconnect();
    },
  };
}
