import { sql, type Kysely } from 'kysely';
import type { EngagementEvent, LeaderboardWindowEvent } from '../domain/engagement-events.ts';
import type { Condition, LeaderboardEvent, MetricType } from '../domain/leaderboard.ts';
import type { UserEvent } from '../domain/user.ts';
import { isoWeekOf, leaderboardWindowAt, localDate, type WindowedLeaderboard } from '../domain/windows.ts';
import { forgetInBatch, perBatch } from './batch-cache.ts';
import { createTimeZoneTable, recordTimeZone, timeZoneOf } from './organisation-time-zones.ts';
import type { LegacyProjection as Projection } from './legacy.ts';

export const STANDINGS_PROJECTION = 'leaderboard_standings';

interface StandingsLeaderboard extends WindowedLeaderboard {
  id: string;
  metric_type: MetricType;
  status: string;
  conditions: Condition[];
}

/** Which metrics a fact moves, and how: by an amount, or by one when its mark (a day, a week, a challenge) is new. */
function contributions(event: EngagementEvent, timeZone: string): { metric: MetricType; amount: number; mark?: string }[] {
  switch (event.type) {
    case 'XpEarned':
      // Leaderboard pay-outs never count, or a leaderboard would feed itself (DESIGN §6).
      return event.data.source.kind === 'leaderboard' ? [] : [{ metric: 'total-xp', amount: event.data.amount }];
    case 'ActionCompleted':
      return [
        { metric: 'total-actions-completed', amount: 1 },
        { metric: 'qualifying-active-days', amount: 1, mark: localDate(event.data.occurredAt, timeZone) },
        { metric: 'consistent-weeks', amount: 1, mark: isoWeekOf(event.data.occurredAt, timeZone) },
      ];
    case 'ChallengeStarted':
      return [{ metric: 'total-challenges-started', amount: 1 }];
    case 'ChallengeCompleted':
      return [
        { metric: 'total-challenges-completed', amount: 1 },
        { metric: 'unique-challenges-completed', amount: 1, mark: event.data.challengeId },
      ];
    default:
      return [];
  }
}

/** A user takes part when every condition holds for this fact: its community, and the user's variables as they are now. */
function qualifies(conditions: Condition[], communityId: string, variables: Record<string, unknown>): boolean {
  return conditions.every((condition) =>
    condition.type === 'community' ? condition.communityId === communityId : variables[condition.variableConfigId] === condition.value,
  );
}

/**
 * Live leaderboard standings (DESIGN §6): one score per (leaderboard, window, user) with the time it was
 * reached, moved by the engine's facts as they are projected, for leaderboards that are scheduled, live or
 * expired (a draft counts nothing until it is published; an archived one stops). Windows are in the
 * organisation's timezone at the time of the fact. Distinct metrics keep their marks, so a day, week or
 * challenge counts once. Ranks are computed when read (the index orders them); a closed window's frozen
 * standings (`LeaderboardWindowClosed`) are kept beside them.
 */
export const leaderboardStandingsProjection: Projection = {
  name: STANDINGS_PROJECTION,
  version: 1,
  tables: ['leaderboard_scores', 'leaderboard_frozen_standings', 'leaderboard_closed_windows'],
  filter: {
    eventTypes: [
      'OrganisationCreated',
      'OrganisationSettingsChanged',
      'LeaderboardCreated',
      'LeaderboardUpdated',
      'LeaderboardStatusChanged',
      'UserVariablesSet',
      'XpEarned',
      'ActionCompleted',
      'ChallengeStarted',
      'ChallengeCompleted',
      'LeaderboardWindowClosed',
    ],
  },
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

  async apply(db, event) {
    switch (event.type) {
      case 'OrganisationCreated':
      case 'OrganisationSettingsChanged':
        return recordTimeZone(db, 'standings_organisations', event);
      case 'LeaderboardCreated':
      case 'LeaderboardUpdated':
      case 'LeaderboardStatusChanged':
        return foldLeaderboard(db, event as unknown as LeaderboardEvent);
      case 'UserVariablesSet': {
        const { userId, values } = (event as unknown as Extract<UserEvent, { type: 'UserVariablesSet' }>).data;
        await db
          .insertInto('standings_user_variables')
          .values({ user_id: userId, variables: JSON.stringify(values) })
          .onConflict((oc) => oc.column('user_id').doUpdateSet({ variables: JSON.stringify(values) }))
          .execute();
        return;
      }
      case 'LeaderboardWindowClosed': {
        const closed = (event as unknown as LeaderboardWindowEvent).data;
        await db
          .insertInto('leaderboard_closed_windows')
          .values({ leaderboard_id: closed.leaderboardId, window_start: closed.windowStart, window_end: closed.windowEnd, closed_at: closed.closedAt })
          .onConflict((oc) => oc.doNothing())
          .execute();
        if (closed.standings.length === 0) return;
        await db
          .insertInto('leaderboard_frozen_standings')
          .values(
            closed.standings.map((standing) => ({
              leaderboard_id: closed.leaderboardId,
              window_start: closed.windowStart,
              rank: standing.rank,
              user_id: standing.userId,
              score: standing.score,
              reached_at: standing.reachedAt,
              closed_at: closed.closedAt,
            })),
          )
          .onConflict((oc) => oc.columns(['leaderboard_id', 'window_start', 'rank']).doNothing())
          .execute();
        return;
      }
      default:
        return countFact(db, event as unknown as EngagementEvent);
    }
  },
};

/** The organisation's leaderboards that count facts (scheduled, live or expired), read once per batch. */
function countingLeaderboards(db: Kysely<any>, organisationId: string) {
  return perBatch(
    db,
    `leaderboards:${organisationId}`,
    async () =>
      (await db
        .selectFrom('standings_leaderboards')
        .selectAll()
        .where('organisation_id', '=', organisationId)
        .where('status', 'in', ['scheduled', 'live', 'expired'])
        .execute()) as (StandingsLeaderboard & { starts_at: string; expires_at: string | null })[],
  );
}

async function foldLeaderboard(db: Kysely<any>, event: LeaderboardEvent): Promise<void> {
  const { leaderboardId, organisationId } = event.data;
  forgetInBatch(db, `leaderboards:${organisationId}`);
  switch (event.type) {
    case 'LeaderboardCreated': {
      const data = event.data;
      await db
        .insertInto('standings_leaderboards')
        .values({
          id: leaderboardId,
          organisation_id: data.organisationId,
          metric_type: data.metricType,
          period: data.period,
          starts_at: data.startsAt,
          expires_at: data.expiresAt,
          status: data.status,
          conditions: JSON.stringify(data.conditions),
        })
        .onConflict((oc) => oc.column('id').doNothing())
        .execute();
      return;
    }
    case 'LeaderboardUpdated': {
      const { expiresAt, conditions } = event.data.changes;
      if (expiresAt === undefined && conditions === undefined) return;
      await db
        .updateTable('standings_leaderboards')
        .set({
          ...(expiresAt !== undefined ? { expires_at: expiresAt } : {}),
          ...(conditions !== undefined ? { conditions: JSON.stringify(conditions) } : {}),
        })
        .where('id', '=', leaderboardId)
        .execute();
      return;
    }
    case 'LeaderboardStatusChanged':
      await db.updateTable('standings_leaderboards').set({ status: event.data.to }).where('id', '=', leaderboardId).execute();
      return;
  }
}

async function countFact(db: Kysely<any>, event: EngagementEvent): Promise<void> {
  const { organisationId, communityId, userId, occurredAt } = event.data;
  const timeZone = await timeZoneOf(db, 'standings_organisations', organisationId);
  const moves = contributions(event, timeZone);
  if (moves.length === 0) return;
  const metrics = new Set(moves.map((move) => move.metric));
  const leaderboards = (await countingLeaderboards(db, organisationId)).filter((leaderboard) => metrics.has(leaderboard.metric_type));
  if (leaderboards.length === 0) return;
  const needsVariables = leaderboards.some((leaderboard) => leaderboard.conditions.some((condition) => condition.type === 'variable-config'));
  const variables = needsVariables
    ? (((await db.selectFrom('standings_user_variables').select('variables').where('user_id', '=', userId).executeTakeFirst())?.variables ?? {}) as Record<
        string,
        unknown
      >)
    : {};

  for (const leaderboard of leaderboards) {
    if (!qualifies(leaderboard.conditions, communityId, variables)) continue;
    const window = leaderboardWindowAt(
      { period: leaderboard.period, startsAt: leaderboard.starts_at, expiresAt: leaderboard.expires_at },
      timeZone,
      occurredAt,
    );
    if (!window) continue;
    for (const move of moves.filter((candidate) => candidate.metric === leaderboard.metric_type)) {
      if (move.mark !== undefined) {
        const marked = await db
          .insertInto('leaderboard_marks')
          .values({ leaderboard_id: leaderboard.id, window_start: window.start, user_id: userId, mark: move.mark })
          .onConflict((oc) => oc.doNothing())
          .returning('mark')
          .executeTakeFirst();
        if (!marked) continue;
      }
      await db
        .insertInto('leaderboard_scores')
        .values({ leaderboard_id: leaderboard.id, window_start: window.start, user_id: userId, score: move.amount, reached_at: occurredAt })
        .onConflict((oc) =>
          oc.columns(['leaderboard_id', 'window_start', 'user_id']).doUpdateSet({
            score: sql`leaderboard_scores.score + excluded.score`,
            reached_at: sql`greatest(leaderboard_scores.reached_at, excluded.reached_at)`,
          }),
        )
        .execute();
    }
  }
}
