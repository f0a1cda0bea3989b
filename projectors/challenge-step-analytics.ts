import { sql, type Kysely } from 'kysely';
import type { UntypedDb } from '../infra/database.ts';
import type { EngagementEvent } from '../domain/engagement-events.ts';
import { CounterBatch, writeCounters, writeTogether } from './counters.ts';
import { localDateOf } from './local-dates.ts';
import { BatchTimeZones, TIME_ZONE_EVENTS, createTimeZoneTable, isTimeZoneEvent, type TimeZoneEvent, type TimeZoneRow } from './organisation-time-zones.ts';
import { defineProjection, type Recorded } from './projection.ts';

export const STEP_ANALYTICS_PROJECTION = 'challenge_step_analytics';

const TIME_ZONES = 'analytics_step_organisations';

export interface StepsTable {
  challenge_id: string;
  action_id: string;
  organisation_id: string;
  attempts: number;
  criteria_met: number;
  criteria_not_met: number;
  completions: number;
  users_attempted: number;
  users_completed: number;
}

export interface ChallengeStartsTable {
  challenge_id: string;
  organisation_id: string;
  starts: number;
  users_started: number;
}

export interface StepDaysTable {
  challenge_id: string;
  action_id: string;
  user_id: string;
  day: string;
  attempts: number;
  criteria_met: number;
  completions: number;
}

export interface StartDaysTable {
  challenge_id: string;
  user_id: string;
  day: string;
  starts: number;
}

/**
 * A rebuild's staged counts of a batch (`staging`): a day's row, added up at the end, with the organisation
 * and log position of its first fact (an all-time row takes the organisation of its first fact, as live).
 */
export interface StagedStepDaysTable extends StepDaysTable {
  organisation_id: string;
  first_position: string;
}

export interface StagedStartDaysTable extends StartDaysTable {
  organisation_id: string;
  first_position: string;
}

export interface StepAnalyticsTables {
  analytics_steps: StepsTable;
  analytics_challenge_starts: ChallengeStartsTable;
  analytics_step_days: StepDaysTable;
  analytics_start_days: StartDaysTable;
  /** The organisations' time zones, this read model's own copy (not exposed). */
  analytics_step_organisations: TimeZoneRow;
  step_analytics_build_step_days: StagedStepDaysTable;
  step_analytics_build_start_days: StagedStartDaysTable;
}

const STAGED_STEP_DAYS = 'step_analytics_build_step_days';
const STAGED_START_DAYS = 'step_analytics_build_start_days';

type StepAnalyticsEvent = TimeZoneEvent | Extract<EngagementEvent, { type: 'ActionAttempted' | 'ChallengeStarted' }>;

/**
 * Challenge step analytics (`GET /analytics/challenges/stats/action-steps`), from the engine's
 * `ActionAttempted` (every outcome is an attempt; outcome `completed` is a completion) and `ChallengeStarted`:
 *
 * - `analytics_steps`: per (challenge, action), all time: attempts, criteria met / not met, completions,
 *   users who attempted it, users who completed it;
 * - `analytics_challenge_starts`: per challenge, all time: runs started and users who started one;
 * - `analytics_step_days`: per (challenge, action, user, local day): attempts, criteria met, completions,
 *   which both tell whether a user is new to a step and answer a range of days;
 * - `analytics_start_days`: per (challenge, user, local day): runs started.
 *
 * Days are local dates (`YYYY-MM-DD`) in the organisation's time zone at the time of the fact.
 *
 * A batch reads who the (challenge, action, user) and (challenge, user) pairs it names had already counted
 * (one query with its time zones), follows the batch in log order in memory (a user is new to a step at
 * their first attempt in the log, whichever batch it falls in), and adds its counts with one upsert per table.
 *
 * A rebuild stages its batches' day counts instead (`staging`: no lookup, no upsert, a plain insert of each
 * batch's sums) and its end derives every table from them: the all-time rows are sums and distinct users of
 * the day rows. On the bench's store, the 19 other read models rebuilt 3-4 s faster than all 20 (of 24-25 s,
 * 2026-12-07): the lookups and upserts of this one's batches were the largest part of the difference.
 */
export const challengeStepAnalyticsProjection = defineProjection<StepAnalyticsTables, StepAnalyticsEvent>({
  name: STEP_ANALYTICS_PROJECTION,
  // 2: a rebuild stages its day counts (`staging`); a process of version 1 must not take such a build over.
  version: 2,
  tables: ['analytics_steps', 'analytics_challenge_starts', 'analytics_step_days', 'analytics_start_days'],
  // A rebuild's batches write only the staging tables; its end inserts every row of these in one statement each,
  // which goes to the WAL once either way. Unlogged, `SET LOGGED` then read and wrote each table again with its
  // key (the bench's 145,717 step days: 1.5-1.7 s for the insert, key and `SET LOGGED` against 0.9-1.0 logged).
  loggedWhileBuilding: ['analytics_steps', 'analytics_challenge_starts', 'analytics_step_days', 'analytics_start_days'],
  staging: {
    tables: [STAGED_STEP_DAYS, STAGED_START_DAYS],
    async create(db) {
      await db.schema
        .createTable(STAGED_STEP_DAYS)
        .addColumn('challenge_id', 'text', (c) => c.notNull())
        .addColumn('action_id', 'text', (c) => c.notNull())
        .addColumn('user_id', 'text', (c) => c.notNull())
        .addColumn('day', 'text', (c) => c.notNull())
        .addColumn('organisation_id', 'text', (c) => c.notNull())
        .addColumn('first_position', 'text', (c) => c.notNull())
        .addColumn('attempts', 'integer', (c) => c.notNull())
        .addColumn('criteria_met', 'integer', (c) => c.notNull())
        .addColumn('completions', 'integer', (c) => c.notNull())
        .execute();
      await db.schema
        .createTable(STAGED_START_DAYS)
        .addColumn('challenge_id', 'text', (c) => c.notNull())
        .addColumn('user_id', 'text', (c) => c.notNull())
        .addColumn('day', 'text', (c) => c.notNull())
        .addColumn('organisation_id', 'text', (c) => c.notNull())
        .addColumn('first_position', 'text', (c) => c.notNull())
        .addColumn('starts', 'integer', (c) => c.notNull())
        .execute();
    },
    fold: (db) => foldStagedDays(db),
  },
  canHandle: [...TIME_ZONE_EVENTS, 'ActionAttempted', 'ChallengeStarted'],
  migrations: {
    '0001_step_analytics': {
      async up(db) {
        await createTimeZoneTable(db, TIME_ZONES);
        await db.schema
          .createTable('analytics_steps')
          .addColumn('challenge_id', 'text', (c) => c.notNull())
          .addColumn('action_id', 'text', (c) => c.notNull())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('criteria_met', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('criteria_not_met', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('completions', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('users_attempted', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('users_completed', 'integer', (c) => c.notNull().defaultTo(0))
          .addPrimaryKeyConstraint('analytics_steps_pk', ['challenge_id', 'action_id'])
          .execute();
        await db.schema
          .createTable('analytics_challenge_starts')
          .addColumn('challenge_id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('starts', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('users_started', 'integer', (c) => c.notNull().defaultTo(0))
          .execute();
        await db.schema
          .createTable('analytics_step_days')
          .addColumn('challenge_id', 'text', (c) => c.notNull())
          .addColumn('action_id', 'text', (c) => c.notNull())
          .addColumn('user_id', 'text', (c) => c.notNull())
          .addColumn('day', 'text', (c) => c.notNull())
          .addColumn('attempts', 'integer', (c) => c.notNull())
          .addColumn('criteria_met', 'integer', (c) => c.notNull())
          .addColumn('completions', 'integer', (c) => c.notNull())
          // (challenge, action, user) first: has this user attempted or completed this step before?
          .addPrimaryKeyConstraint('analytics_step_days_pk', ['challenge_id', 'action_id', 'user_id', 'day'])
          .execute();
        // A challenge's steps over a range of days.
        await db.schema.createIndex('analytics_step_days_by_day').on('analytics_step_days').columns(['challenge_id', 'day']).execute();
        await db.schema
          .createTable('analytics_start_days')
          .addColumn('challenge_id', 'text', (c) => c.notNull())
          .addColumn('user_id', 'text', (c) => c.notNull())
          .addColumn('day', 'text', (c) => c.notNull())
          .addColumn('starts', 'integer', (c) => c.notNull())
          .addPrimaryKeyConstraint('analytics_start_days_pk', ['challenge_id', 'user_id', 'day'])
          .execute();
        await db.schema.createIndex('analytics_start_days_by_day').on('analytics_start_days').columns(['challenge_id', 'day']).execute();
      },
    },
  },

  async apply(db, events, { staging }) {
    if (staging) return stageDays(db, events);
    const attemptKeys = new Map<string, { challengeId: string; actionId: string; userId: string }>();
    const startKeys = new Map<string, { challengeId: string; userId: string }>();
    const organisations = new Set<string>();
    for (const event of events) {
      organisations.add(event.data.organisationId);
      if (event.type === 'ActionAttempted') {
        const { challengeId, actionId, userId } = event.data;
        attemptKeys.set(stepUser(challengeId, actionId, userId), { challengeId, actionId, userId });
      } else if (event.type === 'ChallengeStarted') {
        const { challengeId, userId } = event.data;
        startKeys.set(challengeUser(challengeId, userId), { challengeId, userId });
      }
    }

    // What the batch needs to know, in one query: the time zones, who had attempted (a row on any day) or
    // completed (completions on some day) each step it names, who had started each challenge it names.
    const stepKeys = [...attemptKeys.values()];
    const challengeKeys = [...startKeys.values()];
    const known = await db
      .selectNoFrom((eb) => [
        eb
          .selectFrom(TIME_ZONES)
          .select(sql<TimeZoneRow[] | null>`json_agg(json_build_object('id', id, 'time_zone', time_zone))`.as('rows'))
          .where('id', 'in', [...organisations])
          .as('zones'),
        eb
          .selectFrom((from) =>
            from
              .selectFrom('analytics_step_days')
              .select((step) => ['challenge_id', 'action_id', 'user_id', step.fn.sum<string>('completions').as('completions')])
              .where(
                sql<boolean>`(challenge_id, action_id, user_id) in (select * from unnest(${stepKeys.map((key) => key.challengeId)}::text[], ${stepKeys.map((key) => key.actionId)}::text[], ${stepKeys.map((key) => key.userId)}::text[]))`,
              )
              .groupBy(['challenge_id', 'action_id', 'user_id'])
              .as('step'),
          )
          .select(sql<[string, string, string, number][] | null>`json_agg(json_build_array(challenge_id, action_id, user_id, completions))`.as('rows'))
          .as('steps'),
        eb
          .selectFrom((from) =>
            from
              .selectFrom('analytics_start_days')
              .select(['challenge_id', 'user_id'])
              .distinct()
              .where(
                sql<boolean>`(challenge_id, user_id) in (select * from unnest(${challengeKeys.map((key) => key.challengeId)}::text[], ${challengeKeys.map((key) => key.userId)}::text[]))`,
              )
              .as('start'),
          )
          .select(sql<[string, string][] | null>`json_agg(json_build_array(challenge_id, user_id))`.as('rows'))
          .as('starts'),
      ])
      .executeTakeFirstOrThrow();
    const zones = BatchTimeZones.of(db, TIME_ZONES, organisations, known.zones ?? []);
    const attempted = new Set<string>();
    const completed = new Set<string>();
    for (const [challengeId, actionId, userId, completions] of known.steps ?? []) {
      const key = stepUser(challengeId, actionId, userId);
      attempted.add(key);
      if (Number(completions) > 0) completed.add(key);
    }
    const started = new Set<string>();
    for (const [challengeId, userId] of known.starts ?? []) started.add(challengeUser(challengeId, userId));

    const stepDays = new CounterBatch('analytics_step_days', ['challenge_id', 'action_id', 'user_id', 'day'], ['attempts', 'criteria_met', 'completions']);
    const steps = new CounterBatch(
      'analytics_steps',
      ['challenge_id', 'action_id'],
      ['attempts', 'criteria_met', 'criteria_not_met', 'completions', 'users_attempted', 'users_completed'],
    );
    const startDays = new CounterBatch('analytics_start_days', ['challenge_id', 'user_id', 'day'], ['starts']);
    const starts = new CounterBatch('analytics_challenge_starts', ['challenge_id'], ['starts', 'users_started']);

    eachFact(events, zones, {
      attempt({ challengeId, actionId, userId, organisationId, outcome, criteriaMet }, day) {
        const key = stepUser(challengeId, actionId, userId);
        const completion = outcome === 'completed';
        const firstAttempt = !attempted.has(key);
        const firstCompletion = completion && !completed.has(key);
        attempted.add(key);
        if (completion) completed.add(key);
        const met = criteriaMet ? 1 : 0;
        stepDays.add(
          { challenge_id: challengeId, action_id: actionId, user_id: userId, day },
          { attempts: 1, criteria_met: met, completions: completion ? 1 : 0 },
        );
        steps.add(
          { challenge_id: challengeId, action_id: actionId },
          {
            attempts: 1,
            criteria_met: met,
            criteria_not_met: 1 - met,
            completions: completion ? 1 : 0,
            users_attempted: firstAttempt ? 1 : 0,
            users_completed: firstCompletion ? 1 : 0,
          },
          { organisation_id: organisationId },
        );
      },
      start({ challengeId, userId, organisationId }, day) {
        const key = challengeUser(challengeId, userId);
        const firstStart = !started.has(key);
        started.add(key);
        startDays.add({ challenge_id: challengeId, user_id: userId, day }, { starts: 1 });
        starts.add({ challenge_id: challengeId }, { starts: 1, users_started: firstStart ? 1 : 0 }, { organisation_id: organisationId });
      },
    });

    await writeCounters(db, [stepDays, steps, startDays, starts]);
    await zones.save();
  },
});

type Attempt = Extract<StepAnalyticsEvent, { type: 'ActionAttempted' }>['data'];
type Start = Extract<StepAnalyticsEvent, { type: 'ChallengeStarted' }>['data'];

/**
 * The batch's facts in log order, each with its local day in its organisation's time zone at that point of the
 * log (a time zone's change recorded as it comes, for the facts after it) and its position.
 */
function eachFact(
  events: readonly Recorded<StepAnalyticsEvent>[],
  zones: BatchTimeZones,
  on: { attempt(fact: Attempt, day: string, position: string): void; start(fact: Start, day: string, position: string): void },
): void {
  for (const event of events) {
    if (isTimeZoneEvent(event)) zones.record(event);
    else if (event.type === 'ActionAttempted') on.attempt(event.data, localDateOf(event.data.occurredAt, zones.of(event.data.organisationId)), event.position);
    else if (event.type === 'ChallengeStarted') on.start(event.data, localDateOf(event.data.occurredAt, zones.of(event.data.organisationId)), event.position);
  }
}

/**
 * A staged batch: its organisations' time zones read, its facts counted per day in log order (a time zone's
 * change applies to the facts after it), the sums inserted into the staging tables as they are.
 */
async function stageDays(db: Kysely<StepAnalyticsTables>, events: readonly Recorded<StepAnalyticsEvent>[]): Promise<void> {
  const organisations = new Set(events.map((event) => event.data.organisationId));
  const rows = await db
    .selectFrom(TIME_ZONES)
    .select(['id', 'time_zone'])
    .where('id', 'in', [...organisations])
    .execute();
  const zones = BatchTimeZones.of(db, TIME_ZONES, organisations, rows);
  const stepDays = new CounterBatch(STAGED_STEP_DAYS, ['challenge_id', 'action_id', 'user_id', 'day'], ['attempts', 'criteria_met', 'completions']);
  const startDays = new CounterBatch(STAGED_START_DAYS, ['challenge_id', 'user_id', 'day'], ['starts']);
  eachFact(events, zones, {
    attempt({ challengeId, actionId, userId, organisationId, outcome, criteriaMet }, day, position) {
      stepDays.add(
        { challenge_id: challengeId, action_id: actionId, user_id: userId, day },
        { attempts: 1, criteria_met: criteriaMet ? 1 : 0, completions: outcome === 'completed' ? 1 : 0 },
        { organisation_id: organisationId, first_position: position },
      );
    },
    start({ challengeId, userId, organisationId }, day, position) {
      startDays.add({ challenge_id: challengeId, user_id: userId, day }, { starts: 1 }, { organisation_id: organisationId, first_position: position });
    },
  });
  await writeTogether(db, [await stepDays.insert(db), await startDays.insert(db)]);
  await zones.save();
}

/**
 * The end of a rebuild that staged its day counts, as its batches would have merged them: the day rows are the
 * staged sums added to those the tables held (events replayed meanwhile, `projections replay`), and the all-time
 * rows are derived from the day rows, written over those the tables held (which the day rows account for):
 * attempts, criteria met and completions are their sums, criteria not met the attempts less those met, the
 * users who attempted a step those with a day row of it, who completed it those with a completion on some day,
 * and likewise the starts. An all-time row keeps the organisation it has, else takes its first staged fact's.
 */
async function foldStagedDays(db: Kysely<StepAnalyticsTables>): Promise<void> {
  await addStagedDays(
    db,
    'analytics_step_days',
    STAGED_STEP_DAYS,
    ['challenge_id', 'action_id', 'user_id', 'day'],
    ['attempts', 'criteria_met', 'completions'],
  );
  await addStagedDays(db, 'analytics_start_days', STAGED_START_DAYS, ['challenge_id', 'user_id', 'day'], ['starts']);
  await db
    .with('organisations', (qc) =>
      qc
        .selectFrom((from) =>
          from
            .selectFrom('analytics_steps')
            .select(['challenge_id', 'action_id', 'organisation_id', sql<string>`''`.as('first_position')])
            .unionAll(from.selectFrom(STAGED_STEP_DAYS).select(['challenge_id', 'action_id', 'organisation_id', 'first_position']))
            .as('named'),
        )
        .distinctOn(['challenge_id', 'action_id'])
        .select(['challenge_id', 'action_id', 'organisation_id'])
        .orderBy('challenge_id')
        .orderBy('action_id')
        .orderBy(sql`first_position collate "C"`),
    )
    .insertInto('analytics_steps')
    .columns([
      'challenge_id',
      'action_id',
      'organisation_id',
      'attempts',
      'criteria_met',
      'criteria_not_met',
      'completions',
      'users_attempted',
      'users_completed',
    ])
    .expression((eb) =>
      eb
        // Per user first, then per step: two hashed groupings instead of the sorts of `count(distinct)`.
        .selectFrom((from) =>
          from
            .selectFrom('analytics_step_days')
            .select([
              'challenge_id',
              'action_id',
              sql<number>`sum(attempts)`.as('attempts'),
              sql<number>`sum(criteria_met)`.as('criteria_met'),
              sql<number>`sum(completions)`.as('completions'),
            ])
            .groupBy(['challenge_id', 'action_id', 'user_id'])
            .as('d'),
        )
        .innerJoin('organisations as o', (join) => join.onRef('o.challenge_id', '=', 'd.challenge_id').onRef('o.action_id', '=', 'd.action_id'))
        .select([
          'd.challenge_id',
          'd.action_id',
          'o.organisation_id',
          sql<number>`sum(d.attempts)`.as('attempts'),
          sql<number>`sum(d.criteria_met)`.as('criteria_met'),
          sql<number>`sum(d.attempts) - sum(d.criteria_met)`.as('criteria_not_met'),
          sql<number>`sum(d.completions)`.as('completions'),
          sql<number>`count(*)`.as('users_attempted'),
          sql<number>`count(*) filter (where d.completions > 0)`.as('users_completed'),
        ])
        .groupBy(['d.challenge_id', 'd.action_id', 'o.organisation_id']),
    )
    .onConflict((oc) =>
      oc.columns(['challenge_id', 'action_id']).doUpdateSet((eb) => ({
        attempts: eb.ref('excluded.attempts'),
        criteria_met: eb.ref('excluded.criteria_met'),
        criteria_not_met: eb.ref('excluded.criteria_not_met'),
        completions: eb.ref('excluded.completions'),
        users_attempted: eb.ref('excluded.users_attempted'),
        users_completed: eb.ref('excluded.users_completed'),
      })),
    )
    .execute();
  await db
    .with('organisations', (qc) =>
      qc
        .selectFrom((from) =>
          from
            .selectFrom('analytics_challenge_starts')
            .select(['challenge_id', 'organisation_id', sql<string>`''`.as('first_position')])
            .unionAll(from.selectFrom(STAGED_START_DAYS).select(['challenge_id', 'organisation_id', 'first_position']))
            .as('named'),
        )
        .distinctOn('challenge_id')
        .select(['challenge_id', 'organisation_id'])
        .orderBy('challenge_id')
        .orderBy(sql`first_position collate "C"`),
    )
    .insertInto('analytics_challenge_starts')
    .columns(['challenge_id', 'organisation_id', 'starts', 'users_started'])
    .expression((eb) =>
      eb
        .selectFrom((from) =>
          from
            .selectFrom('analytics_start_days')
            .select(['challenge_id', sql<number>`sum(starts)`.as('starts')])
            .groupBy(['challenge_id', 'user_id'])
            .as('d'),
        )
        .innerJoin('organisations as o', 'o.challenge_id', 'd.challenge_id')
        .select(['d.challenge_id', 'o.organisation_id', sql<number>`sum(d.starts)`.as('starts'), sql<number>`count(*)`.as('users_started')])
        .groupBy(['d.challenge_id', 'o.organisation_id']),
    )
    .onConflict((oc) =>
      oc.columns(['challenge_id']).doUpdateSet((eb) => ({ starts: eb.ref('excluded.starts'), users_started: eb.ref('excluded.users_started') })),
    )
    .execute();
}

/**
 * A day table's staged sums added to its rows. Into a table the build left empty (nothing replayed meanwhile:
 * the rebuild's case) they go with its primary key dropped and built again after, in one sorted build: on the
 * bench's store, 145,717 step days took 2.5 s through `on conflict` at the end of a rebuild of all 20.
 */
async function addStagedDays(db: UntypedDb, table: string, staged: string, keyColumns: readonly string[], amountColumns: readonly string[]): Promise<void> {
  const sums = db
    .selectFrom(staged)
    .select([...keyColumns, ...amountColumns.map((column) => sql<number>`sum(${sql.ref(column)})::int`.as(column))])
    .groupBy([...keyColumns]);
  const columns = [...keyColumns, ...amountColumns];
  if (
    await db
      .selectFrom(table)
      .select(sql<number>`1`.as('held'))
      .limit(1)
      .executeTakeFirst()
  ) {
    await db
      .insertInto(table)
      .columns(columns)
      .expression(sums)
      .onConflict((oc) =>
        oc
          .columns([...keyColumns])
          .doUpdateSet(Object.fromEntries(amountColumns.map((column) => [column, sql`${sql.id(table, column)} + excluded.${sql.id(column)}`]))),
      )
      .execute();
    return;
  }
  const key = `${table}_pk`;
  await db.schema.alterTable(table).dropConstraint(key).execute();
  await db.insertInto(table).columns(columns).expression(sums).execute();
  await db.schema
    .alterTable(table)
    .addPrimaryKeyConstraint(key, [...keyColumns])
    .execute();
}

/** Map keys: ids joined with a character no id holds. */
function stepUser(challengeId: string, actionId: string, userId: string): string {
  return `${challengeId}\u0000${actionId}\u0000${userId}`;
}

function challengeUser(challengeId: string, userId: string): string {
  return `${challengeId}\u0000${userId}`;
}
