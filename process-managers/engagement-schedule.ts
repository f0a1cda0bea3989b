import type { Migration } from 'kysely';
import type { CustomEventLinkEvent } from '../domain/custom-event-link.ts';
import type { LeaderboardWindowEvent } from '../domain/engagement-events.ts';
import type { LeaderboardEvent, LeaderboardStatus, Period } from '../domain/leaderboard.ts';
import type { RewardEvent } from '../domain/reward.ts';
import { leaderboardWindowAt, nextWindow, type Window } from '../domain/windows.ts';
import type { DueJob } from '../infra/jobs.ts';
import { BatchTimeZones, TIME_ZONE_EVENTS, createTimeZoneTable, type TimeZoneEvent, type TimeZoneRow } from '../projectors/organisation-time-zones.ts';
import { RowBatch } from '../projectors/row-batch.ts';
import { defineProcessManager } from './process-manager.ts';
import {
  LEADERBOARD_STATUS_JOB,
  WINDOW_CLOSE_JOB,
  GIVEAWAY_DRAW_JOB,
  LINK_EXPIRY_JOB,
  type LeaderboardStatusJob,
  type WindowCloseJob,
  type GiveawayDrawJob,
  type LinkExpiryJob,
} from '../domain/jobs.ts';

/** What the schedule knows of a leaderboard: enough to tell its windows and what its status has ahead. */
export interface ScheduleLeaderboardRow {
  id: string;
  organisation_id: string;
  period: Period;
  starts_at: string;
  expires_at: string | null;
  status: LeaderboardStatus;
}

/** The schedule's private state (its own schema, never exposed). */
export interface ScheduleState {
  schedule_organisations: TimeZoneRow;
  schedule_leaderboards: ScheduleLeaderboardRow;
}

const scheduleMigrations: Record<string, Migration> = {
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
};

const SCHEDULE_EVENTS = [
  ...TIME_ZONE_EVENTS,
  'LeaderboardCreated',
  'LeaderboardUpdated',
  'LeaderboardStatusChanged',
  'LeaderboardWindowClosed',
  'RewardCreated',
  'RewardUpdated',
  'CustomEventLinkCreated',
] as const;

type ScheduleEvent = Extract<
  TimeZoneEvent | LeaderboardEvent | LeaderboardWindowEvent | RewardEvent | CustomEventLinkEvent,
  { type: (typeof SCHEDULE_EVENTS)[number] }
>;

/**
 * Process manager for timed engagement work (DESIGN §4): a scheduled leaderboard goes live at startsAt and
 * a live one expires at expiresAt; each window is closed (then the next one is scheduled, from the closing
 * event, so an open-ended leaderboard always has exactly one close ahead); an entries reward is drawn at
 * drawsAt. Job ids are deterministic, so reading the log again schedules nothing twice; a job whose date
 * changed meanwhile finds that out when it runs and does nothing. A custom event link is marked expired at
 * its expiry.
 *
 * A batch reads the leaderboards and time zones it names once, follows them in memory in log order, and
 * writes what changed once; each job is recorded in the batch's transaction.
 */
export const engagementSchedule = defineProcessManager<ScheduleState, ScheduleEvent>({
  name: 'engagement_schedule',
  version: 1,
  migrations: scheduleMigrations,
  canHandle: SCHEDULE_EVENTS,

  async handle(db, events, context) {
    const leaderboards = new RowBatch<ScheduleLeaderboardRow>('schedule_leaderboards', ['id']);
    // A leaderboard's windows are told in its organisation's time zone: the leaderboard events carry both ids.
    const named = events.flatMap((event) => ('leaderboardId' in event.data ? [event.data] : []));
    await leaderboards.load(
      db,
      named.map(({ leaderboardId }) => ({ id: leaderboardId })),
    );
    const zones = await BatchTimeZones.load(
      db,
      'schedule_organisations',
      named.map(({ organisationId }) => organisationId),
    );
    const schedule = new Schedule(leaderboards, zones, (job) => context.schedule(job));

    for (const event of events) {
      switch (event.type) {
        case 'OrganisationCreated':
        case 'OrganisationSettingsChanged':
          zones.record(event);
          break;
        case 'LeaderboardCreated': {
          const { data } = event;
          if (!leaderboards.get({ id: data.leaderboardId })) {
            leaderboards.set({
              id: data.leaderboardId,
              organisation_id: data.organisationId,
              period: data.period,
              starts_at: data.startsAt,
              expires_at: data.expiresAt,
              status: data.status,
            });
          }
          await schedule.leaderboard(data.leaderboardId, data.startsAt);
          break;
        }
        case 'LeaderboardUpdated': {
          const { leaderboardId, changes } = event.data;
          if (changes.expiresAt === undefined) break;
          const row = leaderboards.get({ id: leaderboardId });
          if (row) leaderboards.set({ ...row, expires_at: changes.expiresAt });
          await schedule.leaderboard(leaderboardId, null);
          break;
        }
        case 'LeaderboardStatusChanged': {
          const { leaderboardId, to, changedAt } = event.data;
          const row = leaderboards.get({ id: leaderboardId });
          if (row) leaderboards.set({ ...row, status: to });
          await schedule.leaderboard(leaderboardId, changedAt);
          break;
        }
        case 'LeaderboardWindowClosed': {
          const closed = event.data;
          const leaderboard = leaderboards.get({ id: closed.leaderboardId });
          if (!leaderboard) break;
          const next = nextWindow(windowed(leaderboard), zones.of(leaderboard.organisation_id), { start: closed.windowStart, end: closed.windowEnd });
          if (next) await schedule.windowClose(leaderboard, next);
          break;
        }
        case 'RewardCreated': {
          const { data } = event;
          if (data.kind === 'entries') await schedule.draw({ rewardId: data.rewardId, organisationId: data.organisationId, drawsAt: data.drawsAt });
          break;
        }
        case 'RewardUpdated': {
          const { rewardId, organisationId, changes } = event.data;
          if (changes.drawsAt !== undefined) await schedule.draw({ rewardId, organisationId, drawsAt: changes.drawsAt });
          break;
        }
        case 'CustomEventLinkCreated': {
          const { linkId, organisationId, expiresAt } = event.data;
          const job: LinkExpiryJob = { linkId, organisationId, expiresAt };
          await context.schedule({ id: `${LINK_EXPIRY_JOB}:${linkId}`, kind: LINK_EXPIRY_JOB, organisationId, payload: { ...job }, dueAt: expiresAt });
          break;
        }
      }
    }

    await leaderboards.save(db);
    await zones.save();
  },
});

function windowed(row: ScheduleLeaderboardRow) {
  return { period: row.period, startsAt: row.starts_at, expiresAt: row.expires_at };
}

/** The jobs a batch's events ask for, decided on the batch's view of the leaderboards and time zones. */
class Schedule {
  constructor(
    private readonly leaderboards: RowBatch<ScheduleLeaderboardRow>,
    private readonly zones: BatchTimeZones,
    private readonly schedule: (job: DueJob) => Promise<void>,
  ) {}

  /**
   * What a leaderboard's status asks for: going live at startsAt while scheduled, expiring at expiresAt, and
   * the close of the window current at `from` (its first window when `from` is before startsAt). A draft or
   * archived leaderboard has nothing ahead.
   */
  async leaderboard(leaderboardId: string, from: string | null): Promise<void> {
    const leaderboard = this.leaderboards.get({ id: leaderboardId });
    if (!leaderboard) return;
    const ref = { leaderboardId, organisationId: leaderboard.organisation_id };
    if (leaderboard.status === 'scheduled') {
      const job: LeaderboardStatusJob = { ...ref, from: 'scheduled', to: 'live', at: leaderboard.starts_at };
      await this.schedule({
        id: `${LEADERBOARD_STATUS_JOB}:${leaderboardId}:live:${job.at}`,
        kind: LEADERBOARD_STATUS_JOB,
        organisationId: ref.organisationId,
        payload: { ...job },
        dueAt: job.at,
      });
    }
    if ((leaderboard.status === 'scheduled' || leaderboard.status === 'live') && leaderboard.expires_at) {
      const job: LeaderboardStatusJob = { ...ref, from: 'live', to: 'expired', at: leaderboard.expires_at };
      await this.schedule({
        id: `${LEADERBOARD_STATUS_JOB}:${leaderboardId}:expired:${job.at}`,
        kind: LEADERBOARD_STATUS_JOB,
        organisationId: ref.organisationId,
        payload: { ...job },
        dueAt: job.at,
      });
    }
    if (from === null || leaderboard.status === 'draft' || leaderboard.status === 'archived') return;
    const at = Date.parse(from) < Date.parse(leaderboard.starts_at) ? leaderboard.starts_at : from;
    const window = leaderboardWindowAt(windowed(leaderboard), this.zones.of(leaderboard.organisation_id), at);
    if (window) await this.windowClose(leaderboard, window);
  }

  /** Due at the window's end; the job itself waits out the settlement delay. An open window with no end never closes. */
  async windowClose(leaderboard: ScheduleLeaderboardRow, window: Window): Promise<void> {
    if (window.end === null) return;
    const job: WindowCloseJob = {
      leaderboardId: leaderboard.id,
      organisationId: leaderboard.organisation_id,
      windowStart: window.start,
      windowEnd: window.end,
    };
    await this.schedule({
      id: `${WINDOW_CLOSE_JOB}:${leaderboard.id}:${Date.parse(window.start)}`,
      kind: WINDOW_CLOSE_JOB,
      organisationId: leaderboard.organisation_id,
      payload: { ...job },
      dueAt: window.end,
    });
  }

  async draw(job: GiveawayDrawJob): Promise<void> {
    await this.schedule({
      id: `${GIVEAWAY_DRAW_JOB}:${job.rewardId}:${Date.parse(job.drawsAt)}`,
      kind: GIVEAWAY_DRAW_JOB,
      organisationId: job.organisationId,
      payload: { ...job },
      dueAt: job.drawsAt,
    });
  }
}
