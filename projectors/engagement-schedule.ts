import type { Kysely } from 'kysely';
import type { CustomEventLinkEvent } from '../domain/custom-event-link.ts';
import type { LeaderboardWindowEvent } from '../domain/engagement-events.ts';
import type { LeaderboardEvent, LeaderboardStatus } from '../domain/leaderboard.ts';
import type { RewardEvent } from '../domain/reward.ts';
import { leaderboardWindowAt, nextWindow, type Window, type WindowedLeaderboard } from '../domain/windows.ts';
import { scheduleJob } from '../infra/jobs.ts';
import { createTimeZoneTable, recordTimeZone, timeZoneOf } from './organisation-time-zones.ts';
import type { LegacyProjection as Projection } from './legacy.ts';

export const LEADERBOARD_STATUS_JOB = 'leaderboard-status';
export const WINDOW_CLOSE_JOB = 'leaderboard-window-close';
export const GIVEAWAY_DRAW_JOB = 'giveaway-draw';
export const LINK_EXPIRY_JOB = 'custom-event-link-expiry';

export interface LeaderboardStatusJob {
  leaderboardId: string;
  organisationId: string;
  from: LeaderboardStatus;
  to: LeaderboardStatus;
  /** startsAt or expiresAt as they were when scheduled: a job whose date has since changed does nothing. */
  at: string;
}

export interface WindowCloseJob {
  leaderboardId: string;
  organisationId: string;
  windowStart: string;
  windowEnd: string;
}

export interface GiveawayDrawJob {
  rewardId: string;
  organisationId: string;
  drawsAt: string;
}

export interface LinkExpiryJob {
  linkId: string;
  organisationId: string;
  expiresAt: string;
}

interface ScheduledLeaderboard extends WindowedLeaderboard {
  id: string;
  organisation_id: string;
  status: LeaderboardStatus;
}

/**
 * Process manager for timed engagement work (DESIGN §4): a scheduled leaderboard goes live at startsAt and
 * a live one expires at expiresAt; each window is closed (then the next one is scheduled, from the closing
 * event, so an open-ended leaderboard always has exactly one close ahead); an entries reward is drawn at
 * drawsAt. Job ids are deterministic, so reading the log again schedules nothing twice; a job whose date
 * changed meanwhile finds that out when it runs and does nothing. A custom event link is marked expired at
 * its expiry.
 */
export const engagementSchedule: Projection = {
  name: 'engagement_schedule',
  version: 1,
  tables: [],
  filter: {
    eventTypes: [
      'OrganisationCreated',
      'OrganisationSettingsChanged',
      'LeaderboardCreated',
      'LeaderboardUpdated',
      'LeaderboardStatusChanged',
      'LeaderboardWindowClosed',
      'RewardCreated',
      'RewardUpdated',
      'CustomEventLinkCreated',
    ],
  },
  migrations: {
    '0001_schedule_state': {
      async up(db) {
        await createTimeZoneTable(db, 'schedule_organisations');
        await db.schema
          .createTable('schedule_leaderboards')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('period', 'text', (c) => c.notNull())
          .addColumn('starts_at', 'text', (c) => c.notNull())
          .addColumn('expires_at', 'text')
          .addColumn('status', 'text', (c) => c.notNull())
          .execute();
      },
    },
  },

  async apply(db, event) {
    switch (event.type) {
      case 'OrganisationCreated':
      case 'OrganisationSettingsChanged':
        return recordTimeZone(db, 'schedule_organisations', event);
      case 'LeaderboardCreated': {
        const data = (event as unknown as Extract<LeaderboardEvent, { type: 'LeaderboardCreated' }>).data;
        await db
          .insertInto('schedule_leaderboards')
          .values({
            id: data.leaderboardId,
            organisation_id: data.organisationId,
            period: data.period,
            starts_at: data.startsAt,
            expires_at: data.expiresAt,
            status: data.status,
          })
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
        return scheduleLeaderboard(db, data.leaderboardId, data.startsAt);
      }
      case 'LeaderboardUpdated': {
        const { leaderboardId, changes } = (event as unknown as Extract<LeaderboardEvent, { type: 'LeaderboardUpdated' }>).data;
        if (changes.expiresAt === undefined) return;
        await db.updateTable('schedule_leaderboards').set({ expires_at: changes.expiresAt }).where('id', '=', leaderboardId).execute();
        return scheduleLeaderboard(db, leaderboardId, null);
      }
      case 'LeaderboardStatusChanged': {
        const { leaderboardId, to, changedAt } = (event as unknown as Extract<LeaderboardEvent, { type: 'LeaderboardStatusChanged' }>).data;
        await db.updateTable('schedule_leaderboards').set({ status: to }).where('id', '=', leaderboardId).execute();
        return scheduleLeaderboard(db, leaderboardId, changedAt);
      }
      case 'LeaderboardWindowClosed': {
        const closed = (event as unknown as LeaderboardWindowEvent).data;
        const leaderboard = await loadLeaderboard(db, closed.leaderboardId);
        if (!leaderboard) return;
        const next = nextWindow(leaderboard, await timeZoneOf(db, 'schedule_organisations', leaderboard.organisation_id), {
          start: closed.windowStart,
          end: closed.windowEnd,
        });
        if (next) await scheduleWindowClose(db, leaderboard, next);
        return;
      }
      case 'RewardCreated': {
        const data = (event as unknown as Extract<RewardEvent, { type: 'RewardCreated' }>).data;
        if (data.kind === 'entries') await scheduleDraw(db, { rewardId: data.rewardId, organisationId: data.organisationId, drawsAt: data.drawsAt });
        return;
      }
      case 'CustomEventLinkCreated': {
        const { linkId, organisationId, expiresAt } = (event as unknown as Extract<CustomEventLinkEvent, { type: 'CustomEventLinkCreated' }>).data;
        const job: LinkExpiryJob = { linkId, organisationId, expiresAt };
        await scheduleJob(db, { id: `${LINK_EXPIRY_JOB}:${linkId}`, kind: LINK_EXPIRY_JOB, organisationId, payload: { ...job }, dueAt: expiresAt });
        return;
      }
      case 'RewardUpdated': {
        const { rewardId, organisationId, changes } = (event as unknown as Extract<RewardEvent, { type: 'RewardUpdated' }>).data;
        if (changes.drawsAt !== undefined) await scheduleDraw(db, { rewardId, organisationId, drawsAt: changes.drawsAt });
        return;
      }
    }
  },
};

async function loadLeaderboard(db: Kysely<any>, leaderboardId: string): Promise<ScheduledLeaderboard | null> {
  const row = await db.selectFrom('schedule_leaderboards').selectAll().where('id', '=', leaderboardId).executeTakeFirst();
  if (!row) return null;
  return { id: row.id, organisation_id: row.organisation_id, period: row.period, startsAt: row.starts_at, expiresAt: row.expires_at, status: row.status };
}

/**
 * What a leaderboard's status asks for: going live at startsAt while scheduled, expiring at expiresAt, and
 * the close of the window current at `from` (its first window when `from` is before startsAt). A draft or
 * archived leaderboard has nothing ahead.
 */
async function scheduleLeaderboard(db: Kysely<any>, leaderboardId: string, from: string | null): Promise<void> {
  const leaderboard = await loadLeaderboard(db, leaderboardId);
  if (!leaderboard) return;
  const ref = { leaderboardId, organisationId: leaderboard.organisation_id };
  if (leaderboard.status === 'scheduled') {
    const job: LeaderboardStatusJob = { ...ref, from: 'scheduled', to: 'live', at: leaderboard.startsAt };
    await scheduleJob(db, {
      id: `${LEADERBOARD_STATUS_JOB}:${leaderboardId}:live:${job.at}`,
      kind: LEADERBOARD_STATUS_JOB,
      organisationId: ref.organisationId,
      payload: { ...job },
      dueAt: job.at,
    });
  }
  if ((leaderboard.status === 'scheduled' || leaderboard.status === 'live') && leaderboard.expiresAt) {
    const job: LeaderboardStatusJob = { ...ref, from: 'live', to: 'expired', at: leaderboard.expiresAt };
    await scheduleJob(db, {
      id: `${LEADERBOARD_STATUS_JOB}:${leaderboardId}:expired:${job.at}`,
      kind: LEADERBOARD_STATUS_JOB,
      organisationId: ref.organisationId,
      payload: { ...job },
      dueAt: job.at,
    });
  }
  if (from === null || leaderboard.status === 'draft' || leaderboard.status === 'archived') return;
  const timeZone = await timeZoneOf(db, 'schedule_organisations', leaderboard.organisation_id);
  const at = Date.parse(from) < Date.parse(leaderboard.startsAt) ? leaderboard.startsAt : from;
  const window = leaderboardWindowAt(leaderboard, timeZone, at);
  if (window) await scheduleWindowClose(db, leaderboard, window);
}

/** Due at the window's end; the job itself waits out the settlement delay. An open window with no end never closes. */
async function scheduleWindowClose(db: Kysely<any>, leaderboard: ScheduledLeaderboard, window: Window): Promise<void> {
  if (window.end === null) return;
  const job: WindowCloseJob = { leaderboardId: leaderboard.id, organisationId: leaderboard.organisation_id, windowStart: window.start, windowEnd: window.end };
  await scheduleJob(db, {
    id: `${WINDOW_CLOSE_JOB}:${leaderboard.id}:${Date.parse(window.start)}`,
    kind: WINDOW_CLOSE_JOB,
    organisationId: leaderboard.organisation_id,
    payload: { ...job },
    dueAt: window.end,
  });
}

async function scheduleDraw(db: Kysely<any>, job: GiveawayDrawJob): Promise<void> {
  await scheduleJob(db, {
    id: `${GIVEAWAY_DRAW_JOB}:${job.rewardId}:${Date.parse(job.drawsAt)}`,
    kind: GIVEAWAY_DRAW_JOB,
    organisationId: job.organisationId,
    payload: { ...job },
    dueAt: job.drawsAt,
  });
}
