import { sql, type ColumnType, type Kysely, type Selectable } from 'kysely';
import type { EngagementEvent, LeaderboardWindowEvent } from '../domain/engagement-events.ts';
import type { Condition, LeaderboardEvent, LeaderboardStatus, MetricType, Period } from '../domain/leaderboard.ts';
import type { UserEvent } from '../domain/user.ts';
import type { Window, WindowedLeaderboard } from '../domain/windows.ts';
import { leaderboardWindowOf, localDateOf, localIsoWeekOf } from './local-dates.ts';
import { BatchTimeZones, createTimeZoneTable, TIME_ZONE_EVENTS, type TimeZoneEvent, type TimeZoneRow } from './organisation-time-zones.ts';
import { defineProjection, type Recorded } from './projection.ts';
import { RowBatch } from './row-batch.ts';
import { unnestRows, type ArrayElement } from './unnest.ts';
import type { Timestamp } from './columns.ts';

export const STANDINGS_PROJECTION = 'leaderboard_standings';

/** A timestamptz: read back as a Date, written as an ISO string (or a Date). */

/** A leaderboard as the standings count by it (`starts_at`, `expires_at`: the ISO strings of its events). */
export interface StandingsLeaderboardRow {
  id: string;
  organisation_id: string;
  metric_type: MetricType;
  period: Period;
  starts_at: string;
  expires_at: string | null;
  status: LeaderboardStatus;
  conditions: ColumnType<Condition[], string, string>;
}

/**
 * The tables of the standings read model. Readers see `leaderboard_scores`, `leaderboard_frozen_standings`
 * and `leaderboard_closed_windows`; the rest is the projection's own copy of what it counts by.
 */
export interface LeaderboardStandingsTables {
  standings_organisations: TimeZoneRow;
  standings_leaderboards: StandingsLeaderboardRow;
  standings_user_variables: { user_id: string; variables: ColumnType<Record<string, unknown>, string, string> };
  /** One score per (leaderboard, window, user) with the time it was last raised (the tie-break). */
  leaderboard_scores: { leaderboard_id: string; window_start: Timestamp; user_id: string; score: number; reached_at: Timestamp };
  /** The days, weeks and challenges a distinct metric already counted. */
  leaderboard_marks: { leaderboard_id: string; window_start: Timestamp; user_id: string; mark: string };
  leaderboard_frozen_standings: {
    leaderboard_id: string;
    window_start: Timestamp;
    rank: number;
    user_id: string;
    score: number;
    reached_at: Timestamp;
    closed_at: Timestamp;
  };
  leaderboard_closed_windows: { leaderboard_id: string; window_start: Timestamp; window_end: Timestamp; closed_at: Timestamp };
  /**
   * A rebuild's moves, appended batch by batch and folded into the scores and marks at its end (`staging`):
   * a mark's move carries the position of the fact that made it (the first one counts).
   */
  standings_build_moves: {
    leaderboard_id: string;
    window_start: Timestamp;
    user_id: string;
    amount: number;
    reached_at: Timestamp;
    mark: string | null;
    position: string | null;
  };
}

type Db = Kysely<LeaderboardStandingsTables>;

const FACT_TYPES = ['XpEarned', 'ActionCompleted', 'ChallengeStarted', 'ChallengeCompleted'] as const;
type CountedFact = Extract<EngagementEvent, { type: (typeof FACT_TYPES)[number] }>;

type StandingsEvent =
  | TimeZoneEvent
  | Extract<LeaderboardEvent, { type: 'LeaderboardCreated' | 'LeaderboardUpdated' | 'LeaderboardStatusChanged' }>
  | Extract<UserEvent, { type: 'UserVariablesSet' }>
  | CountedFact
  | LeaderboardWindowEvent;

type Leaderboard = Selectable<StandingsLeaderboardRow>;

/** Statuses whose leaderboards count facts: a draft counts nothing until it is published; an archived one stops. */
const COUNTING: readonly LeaderboardStatus[] = ['scheduled', 'live', 'expired'];

/** The metrics each fact can move, one list each (`BatchLeaderboards.counting` keeps its answers by list). */
const NO_METRICS: readonly MetricType[] = [];
const XP_METRICS: readonly MetricType[] = ['total-xp'];
const ACTION_METRICS: readonly MetricType[] = ['total-actions-completed', 'qualifying-active-days', 'consistent-weeks'];
const START_METRICS: readonly MetricType[] = ['total-challenges-started'];
const COMPLETION_METRICS: readonly MetricType[] = ['total-challenges-completed', 'unique-challenges-completed'];

/** The metrics a fact can move. */
function metricsOf(event: CountedFact): readonly MetricType[] {
  switch (event.type) {
    case 'XpEarned':
      // Leaderboard pay-outs never count, or a leaderboard would feed itself (DESIGN §6).
      return event.data.source.kind === 'leaderboard' ? NO_METRICS : XP_METRICS;
    case 'ActionCompleted':
      return ACTION_METRICS;
    case 'ChallengeStarted':
      return START_METRICS;
    case 'ChallengeCompleted':
      return COMPLETION_METRICS;
  }
}

/**
 * How a fact moves one of its metrics: by an amount, or by one when its mark (a local day, a local week, a
 * challenge) is new. Local days and weeks are read only for a leaderboard that counts them (`localDateOf` keeps
 * the last one: a custom event's facts share their instant).
 */
function contribution(event: CountedFact, metric: MetricType, timeZone: string): { amount: number; mark?: string } {
  // `metricsOf` names each metric for its facts only: XP for `XpEarned`, unique challenges for completions.
  switch (metric) {
    case 'total-xp':
      return { amount: event.type === 'XpEarned' ? event.data.amount : 0 };
    case 'qualifying-active-days':
      return { amount: 1, mark: localDateOf(event.data.occurredAt, timeZone) };
    case 'consistent-weeks':
      return { amount: 1, mark: localIsoWeekOf(event.data.occurredAt, timeZone) };
    case 'unique-challenges-completed':
      return { amount: 1, mark: event.type === 'ChallengeCompleted' ? event.data.challengeId : '' };
    default:
      return { amount: 1 };
  }
}

/** A user takes part when every condition holds for this fact: its community, and the user's variables as they are now. */
function qualifies(conditions: Condition[], communityId: string, variables: Record<string, unknown>): boolean {
  return conditions.every((condition) =>
    condition.type === 'community' ? condition.communityId === communityId : variables[condition.variableConfigId] === condition.value,
  );
}

const hasVariableCondition = (conditions: readonly Condition[]) => conditions.some((condition) => condition.type === 'variable-config');

const FACTS: ReadonlySet<string> = new Set(FACT_TYPES);

function isFact(event: Recorded<StandingsEvent>): event is Recorded<CountedFact> {
  return FACTS.has(event.type);
}

/**
 * Live leaderboard standings (DESIGN §6): one score per (leaderboard, window, user) with the time it was
 * reached, moved by the engine's facts as they are projected, for leaderboards that are scheduled, live or
 * expired (a draft counts nothing until it is published; an archived one stops). Windows are in the
 * organisation's timezone at the time of the fact. Distinct metrics keep their marks, so a day, week or
 * challenge counts once. Ranks are computed when read (the index orders them); a closed window's frozen
 * standings (`LeaderboardWindowClosed`) are kept beside them.
 *
 * A batch reads the time zones, leaderboards and (where a condition needs them) user variables it needs
 * once, follows their changes in memory in log order while it turns each fact into moves, then writes in one
 * statement the frozen windows, the marks (one insert, which says which are new) and the scores (one upsert
 * that adds), and then its changes to its own copies.
 */
export const leaderboardStandingsProjection = defineProjection<LeaderboardStandingsTables, StandingsEvent>({
  name: STANDINGS_PROJECTION,
  // 2: a rebuild stages its moves (`staging`). A process of version 1 must not take over such a build (it would
  // merge beside the staged moves and never fold them): workers only run generations of their own version.
  version: 2,
  tables: ['leaderboard_scores', 'leaderboard_frozen_standings', 'leaderboard_closed_windows'],
  // The scores and marks too: a rebuild's batches stage their moves, which only its end inserts.
  loggedWhileBuilding: ['leaderboard_scores', 'leaderboard_marks', 'leaderboard_frozen_standings', 'leaderboard_closed_windows'],
  staging: {
    tables: ['standings_build_moves'],
    async create(db) {
      await db.schema
        .createTable('standings_build_moves')
        .addColumn('leaderboard_id', 'text', (c) => c.notNull())
        .addColumn('window_start', 'timestamptz', (c) => c.notNull())
        .addColumn('user_id', 'text', (c) => c.notNull())
        .addColumn('amount', 'double precision', (c) => c.notNull())
        .addColumn('reached_at', 'timestamptz', (c) => c.notNull())
        .addColumn('mark', 'text')
        .addColumn('position', 'text')
        .execute();
    },
    fold: (db) => foldStagedMoves(db),
  },
  canHandle: [
    ...TIME_ZONE_EVENTS,
    'LeaderboardCreated',
    'LeaderboardUpdated',
    'LeaderboardStatusChanged',
    'UserVariablesSet',
    ...FACT_TYPES,
    'LeaderboardWindowClosed',
  ],
  migrations: {
    '0001_standings': {
      async up(db) {
        await createTimeZoneTable(db, 'standings_organisations');
        await db.schema
          .createTable('standings_leaderboards')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('metric_type', 'text', (c) => c.notNull())
          .addColumn('period', 'text', (c) => c.notNull())
          .addColumn('starts_at', 'text', (c) => c.notNull())
          .addColumn('expires_at', 'text')
          .addColumn('status', 'text', (c) => c.notNull())
          .addColumn('conditions', 'jsonb', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('standings_leaderboards_by_metric').on('standings_leaderboards').columns(['organisation_id', 'metric_type']).execute();
        await db.schema
          .createTable('standings_user_variables')
          .addColumn('user_id', 'text', (c) => c.primaryKey())
          .addColumn('variables', 'jsonb', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('leaderboard_scores')
          .addColumn('leaderboard_id', 'text', (c) => c.notNull())
          .addColumn('window_start', 'timestamptz', (c) => c.notNull())
          .addColumn('user_id', 'text', (c) => c.notNull())
          .addColumn('score', 'double precision', (c) => c.notNull())
          .addColumn('reached_at', 'timestamptz', (c) => c.notNull())
          .addPrimaryKeyConstraint('leaderboard_scores_pk', ['leaderboard_id', 'window_start', 'user_id'])
          .execute();
        // The ranking order itself: a page of standings and a user's rank are index range scans.
        await db.schema
          .createIndex('leaderboard_scores_ranking')
          .on('leaderboard_scores')
          .columns(['leaderboard_id', 'window_start', 'score desc', 'reached_at', 'user_id'])
          .execute();
        await db.schema
          .createTable('leaderboard_marks')
          .addColumn('leaderboard_id', 'text', (c) => c.notNull())
          .addColumn('window_start', 'timestamptz', (c) => c.notNull())
          .addColumn('user_id', 'text', (c) => c.notNull())
          .addColumn('mark', 'text', (c) => c.notNull())
          .addPrimaryKeyConstraint('leaderboard_marks_pk', ['leaderboard_id', 'window_start', 'user_id', 'mark'])
          .execute();
        await db.schema
          .createTable('leaderboard_frozen_standings')
          .addColumn('leaderboard_id', 'text', (c) => c.notNull())
          .addColumn('window_start', 'timestamptz', (c) => c.notNull())
          .addColumn('rank', 'integer', (c) => c.notNull())
          .addColumn('user_id', 'text', (c) => c.notNull())
          .addColumn('score', 'double precision', (c) => c.notNull())
          .addColumn('reached_at', 'timestamptz', (c) => c.notNull())
          .addColumn('closed_at', 'timestamptz', (c) => c.notNull())
          .addPrimaryKeyConstraint('leaderboard_frozen_standings_pk', ['leaderboard_id', 'window_start', 'rank'])
          .execute();
        await db.schema
          .createTable('leaderboard_closed_windows')
          .addColumn('leaderboard_id', 'text', (c) => c.notNull())
          .addColumn('window_start', 'timestamptz', (c) => c.notNull())
          .addColumn('window_end', 'timestamptz', (c) => c.notNull())
          .addColumn('closed_at', 'timestamptz', (c) => c.notNull())
          .addPrimaryKeyConstraint('leaderboard_closed_windows_pk', ['leaderboard_id', 'window_start'])
          .execute();
        await db.schema
          .createIndex('leaderboard_frozen_standings_by_user')
          .on('leaderboard_frozen_standings')
          .columns(['leaderboard_id', 'window_start', 'user_id'])
          .execute();
      },
    },
  },

  async apply(db, events, { staging }) {
    const factOrganisations = new Set(events.filter(isFact).map((event) => event.data.organisationId));
    const { timeZones, leaderboards } = await loadZonesAndLeaderboards(db, events, factOrganisations);
    const variables = await loadVariables(db, events, leaderboards);
    const moves = new ScoreMoves();
    const closed: LeaderboardWindowEvent['data'][] = [];

    for (const event of events) {
      switch (event.type) {
        case 'OrganisationCreated':
        case 'OrganisationSettingsChanged':
          timeZones.record(event);
          break;
        case 'LeaderboardCreated':
        case 'LeaderboardUpdated':
        case 'LeaderboardStatusChanged':
          leaderboards.fold(event);
          break;
        case 'UserVariablesSet':
          variables.set({ user_id: event.data.userId, variables: event.data.values });
          break;
        case 'LeaderboardWindowClosed':
          closed.push(event.data);
          break;
        default:
          movesOf(event, timeZones.of(event.data.organisationId), leaderboards, variables, moves);
      }
    }

    await (staging ? moves.stage(db, closed) : moves.write(db, closed));
    await timeZones.save();
    await leaderboards.save(db);
    await variables.save(db);
  },
});

/**
 * What the batch's facts add to the scores, folded as they come in log order: per (leaderboard, window, user),
 * the sum of the moves without a mark and the latest time they raised it; per mark, its first move only (a
 * mark counts once, the first time: later ones in the batch, or one already in `leaderboard_marks`, add
 * nothing). A 20,000-event batch of the bench's store makes about 9,300 moves, folded into about 8,200 rows;
 * the statement then reads and groups those instead of every move.
 */
class ScoreMoves {
  private readonly unmarked = new Map<string, UnmarkedScore>();
  private readonly marked = new Map<string, MarkedMove>();

  add(leaderboardId: string, windowStart: string, userId: string, amount: number, reachedAt: string, mark: string | undefined, position: string): void {
    const key = `${leaderboardId}\u0000${windowStart}\u0000${userId}`;
    if (mark !== undefined) {
      const markKey = `${key}\u0000${mark}`;
      if (!this.marked.has(markKey))
        this.marked.set(markKey, { leaderboard_id: leaderboardId, window_start: windowStart, user_id: userId, mark, amount, reached_at: reachedAt, position });
      return;
    }
    // The latest by instant, not by text: an instant's text may leave out its milliseconds.
    const at = Date.parse(reachedAt);
    if (Number.isNaN(at)) throw new RangeError(`a fact's instant is not one: ${JSON.stringify(reachedAt)}`);
    const score = this.unmarked.get(key);
    if (!score) this.unmarked.set(key, { leaderboard_id: leaderboardId, window_start: windowStart, user_id: userId, amount, reached_at: reachedAt, at });
    else {
      score.amount += amount;
      if (at > score.at) {
        score.at = at;
        score.reached_at = reachedAt;
      }
    }
  }

  /**
   * One statement, each set as one JSON array per column (`unnestRows`): the closed windows and their frozen
   * standings inserted, the marks inserted (the new ones come back from the insert), then one upsert of each
   * touched score: its folded sum and the first move of each new mark added, and the latest time it was raised.
   */
  async write(db: Db, closed: readonly LeaderboardWindowEvent['data'][]): Promise<void> {
    if (this.isEmpty(closed)) return;
    const unmarked = this.unmarkedRows();
    const marks: readonly (ScoreMove & { mark: string })[] = [...this.marked.values()];
    const marked = unnestRows(marks, { ...SCORE_MOVE_COLUMNS, mark: 'text' });
    await withClosedWindows(db, closed)
      .with('unmarked', () => sql<ScoreMove>`(${unmarked.select})`)
      .with('marked', () => sql<MarkedMove>`(${marked.select})`)
      .with('new_marks', (qc) =>
        qc
          .insertInto('leaderboard_marks')
          .columns(['leaderboard_id', 'window_start', 'user_id', 'mark'])
          .expression(sql`select leaderboard_id, window_start, user_id, mark from marked`)
          .onConflict((oc) => oc.doNothing())
          .returning(['leaderboard_id', 'window_start', 'user_id', 'mark']),
      )
      .insertInto('leaderboard_scores')
      .columns(['leaderboard_id', 'window_start', 'user_id', 'score', 'reached_at'])
      .expression(
        sql`select leaderboard_id, window_start, user_id, sum(amount), max(reached_at) from (
            select leaderboard_id, window_start, user_id, amount, reached_at from unmarked
            union all
            select m.leaderboard_id, m.window_start, m.user_id, m.amount, m.reached_at
            from marked m join new_marks n using (leaderboard_id, window_start, user_id, mark)
          ) as counted
          group by leaderboard_id, window_start, user_id`,
      )
      .onConflict((oc) =>
        oc.columns(['leaderboard_id', 'window_start', 'user_id']).doUpdateSet({
          score: sql`leaderboard_scores.score + excluded.score`,
          reached_at: sql`greatest(leaderboard_scores.reached_at, excluded.reached_at)`,
        }),
      )
      .execute();
  }

  /**
   * A building generation's batch (`staging`): the closed windows and frozen standings as `write` inserts them,
   * the moves appended to `standings_build_moves` as they are (each mark's first move in the batch, with its
   * fact's position), in one statement. No score or mark is read or merged: `foldStagedMoves` does it once,
   * at the end of the rebuild: `write`'s upsert and insert of marks probe and grow their indexes row by row
   * (the standings' rebuild alone on the bench's store: 8.8-9.7 s of PostgreSQL's CPU so, 11.0-12.5 merging).
   */
  async stage(db: Db, closed: readonly LeaderboardWindowEvent['data'][]): Promise<void> {
    if (this.isEmpty(closed)) return;
    const unmarked = this.unmarkedRows();
    const marked = unnestRows([...this.marked.values()], { ...SCORE_MOVE_COLUMNS, mark: 'text', position: 'text' });
    await withClosedWindows(db, closed)
      .with('marks_staged', (qc) => qc.insertInto('standings_build_moves').columns(marked.columns).expression(marked.select))
      .insertInto('standings_build_moves')
      .columns(unmarked.columns)
      .expression(unmarked.select)
      .execute();
  }

  private isEmpty(closed: readonly LeaderboardWindowEvent['data'][]): boolean {
    return this.unmarked.size === 0 && this.marked.size === 0 && closed.length === 0;
  }

  private unmarkedRows() {
    const scores: ScoreMove[] = [...this.unmarked.values()];
    return unnestRows(scores, SCORE_MOVE_COLUMNS);
  }
}

/**
 * A batch's statement begins with the windows it closed and their standings: a round trip fewer a batch. A
 * batch that closed none (most live ones) has an empty select in their place, not two empty inserts.
 */
function withClosedWindows(db: Db, closed: readonly LeaderboardWindowEvent['data'][]) {
  const frozen = closed.length > 0 ? frozenOf(closed) : null;
  return db
    .with('closed_windows_written', (qc) =>
      frozen
        ? qc
            .insertInto('leaderboard_closed_windows')
            .columns(frozen.windows.columns)
            .expression(frozen.windows.select)
            .onConflict((oc) => oc.doNothing())
        : sql`(select)`,
    )
    .with('frozen_standings_written', (qc) =>
      frozen
        ? qc
            .insertInto('leaderboard_frozen_standings')
            .columns(frozen.standings.columns)
            .expression(frozen.standings.select)
            .onConflict((oc) => oc.columns(['leaderboard_id', 'window_start', 'rank']).doNothing())
        : sql`(select)`,
    );
}

/**
 * The end of a rebuild that staged its moves: merges them all as one batch's `write` would have, in log order
 * (a mark counts once, at its first move: the earliest position), then the runtime drops the table. The scores
 * and marks are empty but for events replayed meanwhile (`projections replay`): the scores there are taken into
 * the moves first, and the marks there count as earlier than any staged one.
 *
 * The scores are written with their primary key dropped and built again after (one sorted build): on the
 * bench's store, 218,722 scores from 407,940 moves took 0.33 s so against 0.96 s through `on conflict` and
 * 0.53 s sorted into the key; the marks, which go in sorted from `distinct on`, 0.29 s into their key.
 */
async function foldStagedMoves(db: Db): Promise<void> {
  await db
    .with('held', (qc) => qc.deleteFrom('leaderboard_scores').returningAll())
    .insertInto('standings_build_moves')
    .columns(['leaderboard_id', 'window_start', 'user_id', 'amount', 'reached_at'])
    .expression((eb) => eb.selectFrom('held').select(['leaderboard_id', 'window_start', 'user_id', 'score', 'reached_at']))
    .execute();
  await db.schema.alterTable('leaderboard_scores').dropConstraint('leaderboard_scores_pk').execute();
  await db
    .with('first_marks', (qc) =>
      qc
        .selectFrom('standings_build_moves')
        .distinctOn([sql`leaderboard_id collate "C"`, 'window_start', sql`user_id collate "C"`, sql`mark collate "C"`])
        .select(['leaderboard_id', 'window_start', 'user_id', 'mark', 'amount', 'reached_at'])
        .where('mark', 'is not', null)
        .orderBy(sql`leaderboard_id collate "C"`)
        .orderBy('window_start')
        .orderBy(sql`user_id collate "C"`)
        .orderBy(sql`mark collate "C"`)
        .orderBy(sql`position collate "C"`),
    )
    // The statement's snapshot is from before its inserts: the marks the table held already count no more.
    .with('new_marks', (qc) =>
      qc
        .selectFrom('first_marks as f')
        .selectAll()
        .where((eb) =>
          eb.not(
            eb.exists(
              eb
                .selectFrom('leaderboard_marks as m')
                .select(sql`1`.as('one'))
                .whereRef('m.leaderboard_id', '=', 'f.leaderboard_id')
                .whereRef('m.window_start', '=', 'f.window_start')
                .whereRef('m.user_id', '=', 'f.user_id')
                .whereRef('m.mark', '=', 'f.mark'),
            ),
          ),
        ),
    )
    .with('marks_written', (qc) =>
      qc
        .insertInto('leaderboard_marks')
        .columns(['leaderboard_id', 'window_start', 'user_id', 'mark'])
        .expression(sql`select leaderboard_id, window_start, user_id, mark from new_marks`),
    )
    .with('unmarked', (qc) =>
      qc.selectFrom('standings_build_moves').select(['leaderboard_id', 'window_start', 'user_id', 'amount', 'reached_at']).where('mark', 'is', null),
    )
    .insertInto('leaderboard_scores')
    .columns(['leaderboard_id', 'window_start', 'user_id', 'score', 'reached_at'])
    .expression(
      sql`select leaderboard_id, window_start, user_id, sum(amount), max(reached_at) from (
          select leaderboard_id, window_start, user_id, amount, reached_at from unmarked
          union all
          select leaderboard_id, window_start, user_id, amount, reached_at from new_marks
        ) as counted
        group by leaderboard_id, window_start, user_id`,
    )
    .execute();
  await db.schema.alterTable('leaderboard_scores').addPrimaryKeyConstraint('leaderboard_scores_pk', ['leaderboard_id', 'window_start', 'user_id']).execute();
}

/** What a move adds to one user's score in one leaderboard window, and when. */
interface ScoreMove {
  leaderboard_id: string;
  window_start: string;
  user_id: string;
  amount: number;
  reached_at: string;
}

const SCORE_MOVE_COLUMNS = {
  leaderboard_id: 'text',
  window_start: 'timestamptz',
  user_id: 'text',
  amount: 'double precision',
  reached_at: 'timestamptz',
} as const satisfies { readonly [Column in keyof ScoreMove]: ArrayElement };

/** The moves of a score without a mark, summed; `at` is `reached_at` in epoch milliseconds. */
type UnmarkedScore = ScoreMove & { at: number };

/** A mark's move, with the position of the fact that made it (a rebuild's fold counts the earliest). */
type MarkedMove = ScoreMove & { mark: string; position: string };

type UserVariables = { user_id: string; variables: Record<string, unknown> };

/**
 * The leaderboards the batch needs: those of the organisations whose facts it counts (whatever their status,
 * which may change within the batch) and those its leaderboard events name, read in one query and folded in
 * memory in log order.
 */
class BatchLeaderboards {
  private readonly byId = new Map<string, Leaderboard>();
  private readonly byOrganisation = new Map<string, Map<string, Leaderboard>>();
  private readonly changed = new Set<string>();
  /** `counting`'s answers by organisation and list of metrics; a changed leaderboard clears them. */
  private readonly countingNow = new Map<string, Map<readonly MetricType[], readonly Leaderboard[]>>();
  /** Each leaderboard's span as `leaderboardWindowOf` takes it: one object per leaderboard, which it keeps what it found for. */
  private readonly spans = new WeakMap<Leaderboard, WindowedLeaderboard>();

  /** The leaderboards the batch's leaderboard events name. */
  static namedBy(events: readonly Recorded<StandingsEvent>[]): Set<string> {
    const ids = new Set<string>();
    for (const event of events) {
      if (event.type === 'LeaderboardCreated' || event.type === 'LeaderboardUpdated' || event.type === 'LeaderboardStatusChanged')
        ids.add(event.data.leaderboardId);
    }
    return ids;
  }

  static of(rows: Iterable<Leaderboard>): BatchLeaderboards {
    const batch = new BatchLeaderboards();
    for (const row of rows) batch.hold(row);
    return batch;
  }

  private hold(leaderboard: Leaderboard): void {
    this.byId.set(leaderboard.id, leaderboard);
    let ofOrganisation = this.byOrganisation.get(leaderboard.organisation_id);
    if (!ofOrganisation) this.byOrganisation.set(leaderboard.organisation_id, (ofOrganisation = new Map<string, Leaderboard>()));
    ofOrganisation.set(leaderboard.id, leaderboard);
  }

  /** A changed leaderboard is a new object; it is saved with the batch. */
  private replace(leaderboard: Leaderboard): void {
    this.countingNow.clear();
    this.hold(leaderboard);
    this.changed.add(leaderboard.id);
  }

  fold(event: Recorded<Extract<StandingsEvent, { type: 'LeaderboardCreated' | 'LeaderboardUpdated' | 'LeaderboardStatusChanged' }>>): void {
    const { leaderboardId } = event.data;
    const known = this.byId.get(leaderboardId);
    switch (event.type) {
      case 'LeaderboardCreated': {
        if (known) return;
        const data = event.data;
        this.replace({
          id: leaderboardId,
          organisation_id: data.organisationId,
          metric_type: data.metricType,
          period: data.period,
          starts_at: data.startsAt,
          expires_at: data.expiresAt,
          status: data.status,
          conditions: data.conditions,
        });
        return;
      }
      case 'LeaderboardUpdated': {
        const { expiresAt, conditions } = event.data.changes;
        if (!known || (expiresAt === undefined && conditions === undefined)) return;
        this.replace({
          ...known,
          ...(expiresAt !== undefined ? { expires_at: expiresAt } : {}),
          ...(conditions !== undefined ? { conditions } : {}),
        });
        return;
      }
      case 'LeaderboardStatusChanged':
        if (known) this.replace({ ...known, status: event.data.to });
        return;
    }
  }

  /** The organisation's leaderboards counting one of these metrics now (`metricsOf`'s lists, kept until a leaderboard changes). */
  counting(organisationId: string, metrics: readonly MetricType[]): readonly Leaderboard[] {
    let ofOrganisation = this.countingNow.get(organisationId);
    if (!ofOrganisation) this.countingNow.set(organisationId, (ofOrganisation = new Map<readonly MetricType[], readonly Leaderboard[]>()));
    let counting = ofOrganisation.get(metrics);
    if (!counting) {
      const all = this.byOrganisation.get(organisationId);
      counting = all ? [...all.values()].filter((leaderboard) => COUNTING.includes(leaderboard.status) && metrics.includes(leaderboard.metric_type)) : [];
      ofOrganisation.set(metrics, counting);
    }
    return counting;
  }

  /**
   * The organisations any of whose leaderboards, as loaded or as the batch defines them, has a variable
   * condition (one pass over the batch, not one per organisation).
   */
  needingVariables(events: readonly Recorded<StandingsEvent>[]): Set<string> {
    const organisations = new Set<string>();
    for (const leaderboard of this.byId.values()) if (hasVariableCondition(leaderboard.conditions)) organisations.add(leaderboard.organisation_id);
    for (const event of events) {
      if (
        (event.type === 'LeaderboardCreated' && hasVariableCondition(event.data.conditions)) ||
        (event.type === 'LeaderboardUpdated' && hasVariableCondition(event.data.changes.conditions ?? []))
      )
        organisations.add(event.data.organisationId);
    }
    return organisations;
  }

  windowAt(leaderboard: Leaderboard, timeZone: string, instant: string): Window | null {
    let span = this.spans.get(leaderboard);
    if (!span) this.spans.set(leaderboard, (span = { period: leaderboard.period, startsAt: leaderboard.starts_at, expiresAt: leaderboard.expires_at }));
    return leaderboardWindowOf(span, timeZone, instant);
  }

  /** The batch's changes: one multi-row upsert. */
  async save(db: Db): Promise<void> {
    if (this.changed.size === 0) return;
    const rows = [...this.changed].map((id) => {
      const leaderboard = this.byId.get(id)!;
      return { ...leaderboard, conditions: JSON.stringify(leaderboard.conditions) };
    });
    await db
      .insertInto('standings_leaderboards')
      .values(rows)
      .onConflict((oc) =>
        oc.column('id').doUpdateSet((eb) => ({
          expires_at: eb.ref('excluded.expires_at'),
          status: eb.ref('excluded.status'),
          conditions: eb.ref('excluded.conditions'),
        })),
      )
      .execute();
    this.changed.clear();
  }
}

/**
 * The time zones of the organisations whose facts the batch counts and the leaderboards it needs (theirs, and
 * those its leaderboard events name), in one query: two subqueries aggregated as JSON (every column is text or
 * JSON, so the rows come back as a plain read gives them).
 */
async function loadZonesAndLeaderboards(
  db: Db,
  events: readonly Recorded<StandingsEvent>[],
  organisationIds: Set<string>,
): Promise<{ timeZones: BatchTimeZones; leaderboards: BatchLeaderboards }> {
  const ids = BatchLeaderboards.namedBy(events);
  if (organisationIds.size === 0) {
    const rows =
      ids.size === 0
        ? []
        : await db
            .selectFrom('standings_leaderboards')
            .selectAll()
            .where('id', 'in', [...ids])
            .execute();
    return { timeZones: await BatchTimeZones.load(db, 'standings_organisations', []), leaderboards: BatchLeaderboards.of(rows) };
  }
  const organisations = [...organisationIds];
  const row = await db
    .selectNoFrom((eb) => [
      eb
        .selectFrom('standings_organisations')
        .select(sql<TimeZoneRow[] | null>`json_agg(json_build_object('id', id, 'time_zone', time_zone))`.as('rows'))
        .where('id', 'in', organisations)
        .as('zones'),
      eb
        .selectFrom('standings_leaderboards as l')
        .select(sql<Leaderboard[] | null>`json_agg(to_json(l))`.as('rows'))
        .where((where) => where.or([where('l.organisation_id', 'in', organisations), ...(ids.size > 0 ? [where('l.id', 'in', [...ids])] : [])]))
        .as('leaderboards'),
    ])
    .executeTakeFirstOrThrow();
  return {
    timeZones: BatchTimeZones.of(db, 'standings_organisations', organisations, row.zones ?? []),
    leaderboards: BatchLeaderboards.of(row.leaderboards ?? []),
  };
}

/**
 * The variables of the users whose facts the batch counts in an organisation with a variable condition
 * (one query), and the batch's own `UserVariablesSet` (which replace them).
 */
async function loadVariables(db: Db, events: readonly Recorded<StandingsEvent>[], leaderboards: BatchLeaderboards): Promise<RowBatch<UserVariables>> {
  const variables = new RowBatch<UserVariables>('standings_user_variables', ['user_id']);
  const needed = leaderboards.needingVariables(events);
  const users = new Set<string>();
  if (needed.size > 0)
    for (const event of events) {
      if (isFact(event) && needed.has(event.data.organisationId)) users.add(event.data.userId);
    }
  await variables.load(
    db,
    [...users].map((user_id) => ({ user_id })),
  );
  return variables;
}

/** Adds what one fact moves to `moves`. */
function movesOf(event: Recorded<CountedFact>, timeZone: string, leaderboards: BatchLeaderboards, variables: RowBatch<UserVariables>, moves: ScoreMoves): void {
  const { organisationId, communityId, userId, occurredAt } = event.data;
  const metrics = metricsOf(event);
  if (metrics.length === 0) return;
  const counting = leaderboards.counting(organisationId, metrics);
  if (counting.length === 0) return;
  const needsVariables = counting.some((leaderboard) => hasVariableCondition(leaderboard.conditions));
  const userVariables = needsVariables ? (variables.get({ user_id: userId })?.variables ?? {}) : {};
  for (const leaderboard of counting) {
    if (!qualifies(leaderboard.conditions, communityId, userVariables)) continue;
    const window = leaderboards.windowAt(leaderboard, timeZone, occurredAt);
    if (!window) continue;
    const { amount, mark } = contribution(event, leaderboard.metric_type, timeZone);
    moves.add(leaderboard.id, window.start, userId, amount, occurredAt, mark, event.position);
  }
}

/** A batch's closed windows and their frozen standings, as rows of a statement (`unnestRows`). */
interface Frozen {
  windows: ReturnType<typeof unnestRows<ClosedWindowRow>>;
  standings: ReturnType<typeof unnestRows<FrozenStandingRow>>;
}

type ClosedWindowRow = { leaderboard_id: string; window_start: string; window_end: string; closed_at: string };
type FrozenStandingRow = { leaderboard_id: string; window_start: string; rank: number; user_id: string; score: number; reached_at: string; closed_at: string };

/**
 * Closed windows and their frozen standings, as first recorded (a window closed again changes nothing): one
 * insert each, `on conflict do nothing`, as CTEs of the batch's statement (`ScoreMoves.write`).
 */
function frozenOf(closed: readonly LeaderboardWindowEvent['data'][]): Frozen {
  const windows = new Map<string, ClosedWindowRow>();
  const standings = new Map<string, FrozenStandingRow>();
  for (const window of closed) {
    const key = `${window.leaderboardId} ${Date.parse(window.windowStart)}`;
    if (!windows.has(key))
      windows.set(key, { leaderboard_id: window.leaderboardId, window_start: window.windowStart, window_end: window.windowEnd, closed_at: window.closedAt });
    for (const standing of window.standings) {
      const rank = `${key} ${standing.rank}`;
      if (standings.has(rank)) continue;
      standings.set(rank, {
        leaderboard_id: window.leaderboardId,
        window_start: window.windowStart,
        rank: standing.rank,
        user_id: standing.userId,
        score: standing.score,
        reached_at: standing.reachedAt,
        closed_at: window.closedAt,
      });
    }
  }
  return {
    windows: unnestRows([...windows.values()], { leaderboard_id: 'text', window_start: 'timestamptz', window_end: 'timestamptz', closed_at: 'timestamptz' }),
    standings: unnestRows([...standings.values()], {
      leaderboard_id: 'text',
      window_start: 'timestamptz',
      rank: 'integer',
      user_id: 'text',
      score: 'double precision',
      reached_at: 'timestamptz',
      closed_at: 'timestamptz',
    }),
  };
}
