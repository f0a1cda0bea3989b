import type { Kysely } from 'kysely';
import type { EngagementEvent } from '../domain/engagement-events.ts';
import { localDate } from '../domain/windows.ts';
import { addTo } from './counters.ts';
import { TIME_ZONE_EVENTS, createTimeZoneTable, recordTimeZone, timeZoneOf } from './organisation-time-zones.ts';
import type { LegacyProjection as Projection } from './legacy.ts';

export const STEP_ANALYTICS_PROJECTION = 'challenge_step_analytics';

const TIME_ZONES = 'analytics_step_organisations';

type Attempted = Extract<EngagementEvent, { type: 'ActionAttempted' }>['data'];
type Started = Extract<EngagementEvent, { type: 'ChallengeStarted' }>['data'];

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
 */
export const challengeStepAnalyticsProjection: Projection = {
  name: STEP_ANALYTICS_PROJECTION,
  version: 1,
  tables: ['analytics_steps', 'analytics_challenge_starts', 'analytics_step_days', 'analytics_start_days'],
  filter: { eventTypes: [...TIME_ZONE_EVENTS, 'ActionAttempted', 'ChallengeStarted'] },
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

  async apply(db, event) {
    switch (event.type) {
      case 'OrganisationCreated':
      case 'OrganisationSettingsChanged':
        return recordTimeZone(db, TIME_ZONES, event);
      case 'ActionAttempted':
        return countAttempt(db, event.data as Attempted);
      case 'ChallengeStarted':
        return countStart(db, event.data as Started);
    }
  },
};

async function countAttempt(db: Kysely<any>, attempt: Attempted): Promise<void> {
  const { challengeId, actionId, userId, organisationId } = attempt;
  const day = localDate(attempt.occurredAt, await timeZoneOf(db, TIME_ZONES, organisationId));
  const completed = attempt.outcome === 'completed';
  const before = await db
    .selectFrom('analytics_step_days')
    .select((eb) => [eb.fn.countAll<string>().as('days'), eb.fn.sum<string | null>('completions').as('completions')])
    .where('challenge_id', '=', challengeId)
    .where('action_id', '=', actionId)
    .where('user_id', '=', userId)
    .executeTakeFirstOrThrow();
  const firstAttempt = Number(before.days) === 0;
  const firstCompletion = completed && Number(before.completions ?? 0) === 0;
  const met = attempt.criteriaMet ? 1 : 0;
  await addTo(
    db,
    'analytics_step_days',
    { challenge_id: challengeId, action_id: actionId, user_id: userId, day },
    { attempts: 1, criteria_met: met, completions: completed ? 1 : 0 },
  );
  await addTo(
    db,
    'analytics_steps',
    { challenge_id: challengeId, action_id: actionId },
    {
      attempts: 1,
      criteria_met: met,
      criteria_not_met: 1 - met,
      completions: completed ? 1 : 0,
      users_attempted: firstAttempt ? 1 : 0,
      users_completed: firstCompletion ? 1 : 0,
    },
    { organisation_id: organisationId },
  );
}

async function countStart(db: Kysely<any>, start: Started): Promise<void> {
  const { challengeId, userId, organisationId } = start;
  const day = localDate(start.occurredAt, await timeZoneOf(db, TIME_ZONES, organisationId));
  const before = await db
    .selectFrom('analytics_start_days')
    .select('day')
    .where('challenge_id', '=', challengeId)
    .where('user_id', '=', userId)
    .limit(1)
    .executeTakeFirst();
  await addTo(db, 'analytics_start_days', { challenge_id: challengeId, user_id: userId, day }, { starts: 1 });
  await addTo(
    db,
    'analytics_challenge_starts',
    { challenge_id: challengeId },
    { starts: 1, users_started: before ? 0 : 1 },
    { organisation_id: organisationId },
  );
}
