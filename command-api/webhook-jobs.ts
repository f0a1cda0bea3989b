import { leaderboardDecider, type LeaderboardEvent } from '../domain/leaderboard.ts';
import { fold } from '../domain/decider.ts';
import type { RewardAssetEvent } from '../domain/engagement-events.ts';
import {
  WEBHOOK_SOURCE_EVENT_TYPES,
  leaderboardTermsOf,
  lookupsOf,
  type AssetTerms,
  type LeaderboardTerms,
  type MessageLookups,
  type WebhookSourceEvent,
} from '../domain/webhook-messages.ts';
import { deliveryDecider, signingKeyIds, webhookDecider } from '../domain/webhook.ts';
import type { EventStore, RecordedEvent, StreamAppend } from '../infra/event-store/port.ts';
import { scheduleJob, type JobContext, type JobHandler } from '../infra/jobs.ts';
import { userTokenKey } from '../infra/user-tokens.ts';
import { sendWebhook, webhookSecret } from '../infra/webhook-sender.ts';
import {
  WEBHOOK_DELIVERY_JOB,
  WEBHOOK_REPLAY_JOB,
  deliveryRequests,
  type WebhookDeliveryJob,
  type WebhookReplayJob,
} from '../process-managers/webhook-deliveries.ts';
import { aggregateStream } from './command-handling.ts';
import type { ServiceContext } from './context.ts';
import { appendDecided } from './jobs.ts';

/** Events of the log one replay job reads (a page); the next page is the next job. */
export const REPLAY_PAGE_SIZE = 1000;
const APPENDS_PER_CALL = 200;

/**
 * The webhook jobs: one attempt of one delivery, and one page of a replay. An attempt decides on the
 * delivery's stream, so a job run again after a crash sends again (at least once, the same `webhook-id`)
 * but records one attempt; the process manager schedules what the recorded attempt asks for next.
 */
export function webhookJobHandlers(ctx: ServiceContext): Record<string, JobHandler> {
  const serverKey = userTokenKey(ctx.config);
  return {
    [WEBHOOK_DELIVERY_JOB]: (job: WebhookDeliveryJob, context) => attemptDelivery(ctx, serverKey, job, context),
    [WEBHOOK_REPLAY_JOB]: (job: WebhookReplayJob, context) => replayPage(ctx, job, context),
  };
}

async function attemptDelivery(ctx: ServiceContext, serverKey: Uint8Array, job: WebhookDeliveryJob, context: JobContext): Promise<void> {
  const stream = `webhookdelivery-${job.deliveryId}`;
  const delivery = await aggregateStream(ctx.store, stream, deliveryDecider);
  // Recorded already, or redelivered since: this attempt is not due any more.
  if (!delivery.exists || delivery.outcome !== 'pending' || delivery.attempts >= job.attempt) return;
  const metadata = { organisationId: delivery.organisationId };
  const webhookStream = `webhook-${delivery.webhookId}`;
  const webhook = await aggregateStream(ctx.store, webhookStream, webhookDecider);
  const now = ctx.clock.now();
  if (!webhook.exists || webhook.deleted || webhook.status === 'disabled') {
    const reason = !webhook.exists || webhook.deleted ? 'the webhook was deleted' : 'the webhook is disabled';
    await appendDecided(ctx, stream, deliveryDecider, { type: 'CancelDelivery', data: { reason, now: now.toISOString() } }, context.jobId, metadata);
    return;
  }
  const { type, timestamp, data } = delivery.payload;
  const result = await sendWebhook(
    {
      url: webhook.url,
      messageId: delivery.messageId,
      body: JSON.stringify({ type, timestamp, data }),
      secrets: signingKeyIds(webhook, now).map((keyId) => webhookSecret(serverKey, webhook.id, keyId)),
    },
    { allowPrivateAddresses: ctx.config.webhookAllowPrivateAddresses },
  );
  ctx.logger[result.error ? 'warn' : 'debug'](
    {
      deliveryId: job.deliveryId,
      webhookId: webhook.id,
      attempt: job.attempt,
      statusCode: result.statusCode,
      error: result.error,
      durationMs: result.durationMs,
    },
    result.error ? 'webhook attempt failed' : 'webhook delivered',
  );
  await appendDecided(
    ctx,
    stream,
    deliveryDecider,
    { type: 'RecordDeliveryAttempt', data: { attempt: job.attempt, attemptedAt: now.toISOString(), result, jitter: Math.random() } },
    context.jobId,
    metadata,
  );
  // The endpoint's health follows what was recorded (this run's outcome, or an earlier run's).
  const recorded = await aggregateStream(ctx.store, stream, deliveryDecider);
  if (!recorded.exists || recorded.attempts !== job.attempt || recorded.outcome === 'pending' || recorded.outcome === 'cancelled') return;
  if (recorded.outcome === 'succeeded' && webhook.status !== 'failing') return;
  const outcome = recorded.outcome === 'succeeded' ? 'succeeded' : recorded.lastStatusCode === 410 ? 'gone' : 'failed';
  await appendDecided(
    ctx,
    webhookStream,
    webhookDecider,
    {
      type: 'RecordDeliveryOutcome',
      data: {
        webhookId: webhook.id,
        organisationId: webhook.organisationId,
        outcome,
        failingSince: recorded.cycleStartedAt ?? now.toISOString(),
        now: now.toISOString(),
      },
    },
    context.jobId,
    metadata,
  );
}

/**
 * One page of a replay: the organisation's events of the page that the endpoint subscribes to, each asked
 * for again as a delivery of the replay's own (the same `webhook-id` as the event's live delivery). Ids
 * derive from the replay, so a page run twice asks for nothing new; the next page's job starts where this
 * page stopped, until the head of the log as it was when the replay was asked for.
 */
async function replayPage(ctx: ServiceContext, job: WebhookReplayJob, context: JobContext): Promise<void> {
  const webhook = await aggregateStream(ctx.store, `webhook-${job.webhookId}`, webhookDecider);
  if (!webhook.exists || webhook.deleted || webhook.status === 'disabled') return;
  const page = await ctx.store.readAll({ after: job.after, until: job.until, limit: REPLAY_PAGE_SIZE, filter: { eventTypes: WEBHOOK_SOURCE_EVENT_TYPES } });
  const lookups = new StreamLookups(ctx.store);
  const requestedAt = ctx.clock.now().toISOString();
  const appends: StreamAppend[] = [];
  for (const event of page.events) {
    if ((event.data as { organisationId?: string }).organisationId !== job.organisationId) continue;
    const recordedAt = event.createdAt.getTime();
    if ((job.from !== null && recordedAt < Date.parse(job.from)) || (job.to !== null && recordedAt >= Date.parse(job.to))) continue;
    appends.push(
      ...deliveryRequests(webhook, event, await lookups.at(event), {
        requestedAt,
        trigger: 'replay',
        replayId: job.replayId,
      }),
    );
  }
  for (let start = 0; start < appends.length; start += APPENDS_PER_CALL) await ctx.store.appendMultiple(appends.slice(start, start + APPENDS_PER_CALL));
  const more = page.checkpoint !== null && page.checkpoint < job.until && page.events.length > 0;
  ctx.logger.info(
    {
      replayId: job.replayId,
      webhookId: job.webhookId,
      position: page.checkpoint,
      until: job.until,
      deliveries: appends.length,
      done: !more,
      jobId: context.jobId,
    },
    'webhook replay page',
  );
  if (!more) return;
  const next: WebhookReplayJob = { ...job, after: page.checkpoint };
  await scheduleJob(ctx.database.db, {
    id: `${WEBHOOK_REPLAY_JOB}:${job.replayId}:${page.checkpoint}`,
    kind: WEBHOOK_REPLAY_JOB,
    organisationId: job.organisationId,
    payload: { ...next },
    dueAt: requestedAt,
  });
}

/**
 * What a replayed event's messages look up, read from the log as it stood at the event: a leaderboard's
 * events before it (folded as the process manager folded them live), an asset's grant.
 */
class StreamLookups {
  private readonly leaderboards = new Map<string, RecordedEvent[]>();
  private readonly assets = new Map<string, AssetTerms | undefined>();

  constructor(private readonly store: EventStore) {}

  async at(event: RecordedEvent): Promise<MessageLookups> {
    const { leaderboardId, assetId } = lookupsOf(event as unknown as WebhookSourceEvent);
    let terms: LeaderboardTerms | undefined;
    if (leaderboardId !== undefined) {
      if (!this.leaderboards.has(leaderboardId)) this.leaderboards.set(leaderboardId, await this.store.readStream(`leaderboard-${leaderboardId}`));
      const before = this.leaderboards.get(leaderboardId)!.filter((recorded) => recorded.position < event.position);
      terms = leaderboardTermsOf(fold(leaderboardDecider, before.map(({ type, data }) => ({ type, data })) as LeaderboardEvent[]));
    }
    if (assetId !== undefined && !this.assets.has(assetId)) {
      const [granted] = await this.store.readStream(`rewardasset-${assetId}`, { limit: 1 });
      const grant = granted?.type === 'RewardAssetGranted' ? (granted.data as Extract<RewardAssetEvent, { type: 'RewardAssetGranted' }>['data']) : undefined;
      this.assets.set(assetId, grant && { rewardId: grant.rewardId, allocationId: grant.allocationId, communityId: grant.communityId });
    }
    return { leaderboard: () => terms, asset: (id) => this.assets.get(id) };
  }
}
