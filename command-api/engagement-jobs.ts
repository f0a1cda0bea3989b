import { customEventLinkDecider } from '../domain/custom-event-link.ts';
import { drawWinners, newDrawSeed } from '../domain/draw.ts';
import type { LeaderboardWindowEvent } from '../domain/engagement-events.ts';
import { leaderboardDecider } from '../domain/leaderboard.ts';
import { rewardDecider, type RewardCommand } from '../domain/reward.ts';
import { WrongExpectedRevisionError } from '../infra/event-store/port.ts';
import { idFrom, uuidFrom } from '../infra/ids.ts';
import { JobNotDueYet, type JobContext, type JobHandler } from '../infra/jobs.ts';
import { ENGINE_PROCESS, leaderboardWindowStream, readEntriesForDraw } from '../process-managers/engagement-engine/index.ts';
import {
  GIVEAWAY_DRAW_JOB,
  LEADERBOARD_STATUS_JOB,
  LINK_EXPIRY_JOB,
  type LinkExpiryJob,
  WINDOW_CLOSE_JOB,
  type GiveawayDrawJob,
  type LeaderboardStatusJob,
  type WindowCloseJob,
} from '../process-managers/engagement-schedule.ts';
import { STANDINGS_PROJECTION } from '../projectors/leaderboard-standings.ts';
import { waitForProjections } from '../projectors/runtime/index.ts';
import { rankedStandings } from '../query-api/leaderboard-standings.ts';
import { aggregateStream } from './command-handling.ts';
import type { ServiceContext } from './context.ts';
import { appendDecided } from './jobs.ts';

/** How long a settling job waits for the read models to reach the log's head before it fails and is retried. */
const CATCH_UP_TIMEOUT_MS = 30_000;

/**
 * The timed engagement work (DESIGN §4). Each job decides one event on the stream that makes it happen
 * once: the leaderboard's status, the window's own stream, the reward's draw. Run twice, killed and
 * retried, or raced by a second worker, the second run finds the event there and does nothing; the
 * engine then pays out from that one event.
 */
export function engagementJobHandlers(ctx: ServiceContext): Record<string, JobHandler> {
  return {
    [LEADERBOARD_STATUS_JOB]: (job: LeaderboardStatusJob, context) => changeStatus(ctx, job, context),
    [WINDOW_CLOSE_JOB]: (job: WindowCloseJob, context) => closeWindow(ctx, job, context),
    [GIVEAWAY_DRAW_JOB]: (job: GiveawayDrawJob, context) => drawGiveaway(ctx, job, context),
    [LINK_EXPIRY_JOB]: (job: LinkExpiryJob, context) => expireLink(ctx, job, context),
  };
}

function settledAfter(ctx: ServiceContext, at: string): void {
  const settled = new Date(Date.parse(at) + ctx.config.settlementDelaySeconds * 1000);
  if (ctx.clock.now() < settled) throw new JobNotDueYet(settled);
}

/** Waits until each group of read models has seen the whole log, one group after the other (the engine's facts first). */
async function caughtUp(ctx: ServiceContext, ...groups: string[][]): Promise<void> {
  for (const names of groups) {
    const head = await ctx.store.head();
    if (head && !(await waitForProjections(ctx.database.db, names, head.position, CATCH_UP_TIMEOUT_MS))) {
      throw new Error(`${names.join(', ')} did not catch up with the log`);
    }
  }
}

async function changeStatus(ctx: ServiceContext, job: LeaderboardStatusJob, context: JobContext): Promise<void> {
  const stream = `leaderboard-${job.leaderboardId}`;
  const state = await aggregateStream(ctx.store, stream, leaderboardDecider);
  if (!state.exists || state.status !== job.from) return;
  const due = job.to === 'live' ? state.startsAt : state.expiresAt;
  if (due === null || Date.parse(due) !== Date.parse(job.at)) return;
  if (ctx.clock.now().getTime() < Date.parse(due)) throw new JobNotDueYet(new Date(due));
  await appendDecided(
    ctx,
    stream,
    leaderboardDecider,
    {
      type: 'UpdateLeaderboard',
      data: { leaderboardId: job.leaderboardId, organisationId: job.organisationId, status: job.to, edits: {}, actor: 'system', now: job.at },
    },
    context.jobId,
    { organisationId: job.organisationId },
  );
}

async function closeWindow(ctx: ServiceContext, job: WindowCloseJob, context: JobContext): Promise<void> {
  const state = await aggregateStream(ctx.store, `leaderboard-${job.leaderboardId}`, leaderboardDecider);
  if (!state.exists || state.status === 'draft' || state.status === 'archived') return;
  settledAfter(ctx, job.windowEnd);
  await caughtUp(ctx, [ENGINE_PROCESS], [STANDINGS_PROJECTION]);
  const stream = leaderboardWindowStream(job.leaderboardId, job.windowStart);
  const closed: LeaderboardWindowEvent = {
    type: 'LeaderboardWindowClosed',
    data: {
      leaderboardId: job.leaderboardId,
      organisationId: job.organisationId,
      windowStart: job.windowStart,
      windowEnd: job.windowEnd,
      closedAt: ctx.clock.now().toISOString(),
      standings: await rankedStandings(ctx.database.db, job.leaderboardId, job.windowStart),
    },
  };
  try {
    await ctx.store.append(
      stream,
      [
        {
          id: uuidFrom(`${stream}:closed`),
          type: closed.type,
          data: closed.data,
          metadata: { organisationId: job.organisationId, actor: `job:${context.jobId}`, causationId: context.jobId, occurredAt: closed.data.closedAt },
        },
      ],
      { expectedRevision: 'no_stream' },
    );
  } catch (error) {
    // Closed already, by an earlier run of this job or a rival worker: the window is frozen once.
    if (!(error instanceof WrongExpectedRevisionError)) throw error;
  }
}

async function drawGiveaway(ctx: ServiceContext, job: GiveawayDrawJob, context: JobContext): Promise<void> {
  const stream = `reward-${job.rewardId}`;
  const state = await aggregateStream(ctx.store, stream, rewardDecider);
  if (!state.exists || state.drawn || state.reward.kind !== 'entries') return;
  if (Date.parse(state.reward.drawsAt) !== Date.parse(job.drawsAt)) return;
  settledAfter(ctx, job.drawsAt);
  await caughtUp(ctx, [ENGINE_PROCESS]);
  const entrants = await readEntriesForDraw(ctx.database.db, job.rewardId);
  const seed = newDrawSeed();
  const winners = drawWinners(entrants, state.reward.supply, seed).map((userId) => ({ userId, assetId: idFrom(`giveaway:${job.rewardId}:${userId}`) }));
  const command: RewardCommand = {
    type: 'DrawGiveaway',
    data: { rewardId: job.rewardId, organisationId: job.organisationId, seed, entrants, winners, now: ctx.clock.now().toISOString() },
  };
  await appendDecided(ctx, stream, rewardDecider, command, context.jobId, { organisationId: job.organisationId });
}

async function expireLink(ctx: ServiceContext, job: LinkExpiryJob, context: JobContext): Promise<void> {
  if (ctx.clock.now().getTime() < Date.parse(job.expiresAt)) throw new JobNotDueYet(new Date(job.expiresAt));
  await appendDecided(
    ctx,
    `link-${job.linkId}`,
    customEventLinkDecider,
    { type: 'ExpireCustomEventLink', data: { linkId: job.linkId, organisationId: job.organisationId, now: ctx.clock.now().toISOString() } },
    context.jobId,
    { organisationId: job.organisationId },
  );
}
