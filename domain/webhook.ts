import { DomainError, type Decider, type DomainEvent } from './decider.ts';

/**
 * Webhooks: an organisation's endpoints (stream `webhook-<id>`) and the deliveries to them (stream
 * `webhookdelivery-<id>`, one per message and endpoint). The webhook process manager asks for a delivery
 * for each domain fact an endpoint subscribes to; a job attempts it, and its outcome decides the next
 * attempt and the endpoint's health.
 */

/** The public event types, stable names receivers switch on (`process-managers/webhook-deliveries.ts` maps the facts). */
export const WEBHOOK_EVENT_TYPES = [
  'custom_event.logged',
  'action.completed',
  'challenge.completed',
  'points.awarded',
  'xp.awarded',
  'achievement.earned',
  'reward_entry.awarded',
  'reward_asset.granted',
  'reward_asset.claimed',
  'reward_asset.redeemed',
  'giveaway.drawn',
  'leaderboard.window_closed',
  'streak.extended',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** A subscription names an event type, `*` (every type) or a prefix (`reward_asset.*`). */
export function eventTypePatternProblem(pattern: string): string | null {
  if (pattern === '*' || (WEBHOOK_EVENT_TYPES as readonly string[]).includes(pattern)) return null;
  if (pattern.endsWith('.*') && WEBHOOK_EVENT_TYPES.some((type) => type.startsWith(pattern.slice(0, -1)))) return null;
  return `${pattern} is not an event type, "*" or a prefix such as "reward_asset.*" (types: ${WEBHOOK_EVENT_TYPES.join(', ')})`;
}

export function matchesEventTypes(patterns: readonly string[], type: string): boolean {
  return patterns.some((pattern) => pattern === '*' || pattern === type || (pattern.endsWith('.*') && type.startsWith(pattern.slice(0, -1))));
}

/** `enabled`; `failing` (a delivery failed for a whole day of retries); `disabled` (by an admin, a 410, or failing for days). */
export type WebhookStatus = 'enabled' | 'failing' | 'disabled';
export type WebhookStatusReason = 'requested' | 'gone' | 'failing' | 'recovered';

/** A failing endpoint whose deliveries still give up this long after it started failing is disabled. */
export const DISABLE_AFTER_FAILING_MS = 5 * 24 * 3600_000;
/** After a rotation, messages are signed with the previous secret too for this long, so receivers can switch without losing any. */
export const PREVIOUS_SECRET_GRACE_MS = 24 * 3600_000;

export interface WebhookDefinition {
  url: string;
  eventTypes: string[];
  description: string | null;
}

interface WebhookRef {
  webhookId: string;
  organisationId: string;
}

export type WebhookEvent =
  | DomainEvent<'WebhookCreated', WebhookRef & WebhookDefinition & { secretKeyId: string; createdAt: string; createdBy: string }>
  | DomainEvent<'WebhookUpdated', WebhookRef & { changes: Partial<WebhookDefinition>; updatedAt: string; updatedBy: string }>
  | DomainEvent<
      'WebhookStatusChanged',
      WebhookRef & { from: WebhookStatus; to: WebhookStatus; reason: WebhookStatusReason; failingSince: string | null; changedAt: string; changedBy: string }
    >
  | DomainEvent<'WebhookSecretRotated', WebhookRef & { secretKeyId: string; rotatedAt: string; rotatedBy: string }>
  | DomainEvent<
      'WebhookReplayRequested',
      WebhookRef & {
        replayId: string;
        /** Events after this position (exclusive); null: from the start of the log. */
        fromPosition: string | null;
        /** Only events recorded at or after `from` and before `to`. */
        from: string | null;
        to: string | null;
        /** The head of the log when asked: later events are delivered live anyway. */
        untilPosition: string | null;
        requestedAt: string;
        requestedBy: string;
      }
    >
  | DomainEvent<'WebhookDeleted', WebhookRef & { deletedAt: string; deletedBy: string }>;

export type WebhookCommand =
  | { type: 'CreateWebhook'; data: WebhookRef & WebhookDefinition & { secretKeyId: string; actor: string; now: string } }
  | {
      type: 'UpdateWebhook';
      data: WebhookRef & { changes: Partial<WebhookDefinition>; status?: 'enabled' | 'disabled'; actor: string; now: string };
    }
  | { type: 'RotateWebhookSecret'; data: WebhookRef & { secretKeyId: string; actor: string; now: string } }
  | { type: 'DeleteWebhook'; data: WebhookRef & { actor: string; now: string } }
  | {
      type: 'RequestWebhookReplay';
      data: WebhookRef & {
        replayId: string;
        fromPosition: string | null;
        from: string | null;
        to: string | null;
        untilPosition: string | null;
        actor: string;
        now: string;
      };
    }
  /** A delivery of this endpoint is to be attempted again: the endpoint must exist and take deliveries. */
  | { type: 'RequireDeliverableWebhook'; data: WebhookRef }
  /** What a delivery came to, for the endpoint's health: `failed` gave up after a day of retries, `gone` got a 410. */
  | { type: 'RecordDeliveryOutcome'; data: WebhookRef & { outcome: 'succeeded' | 'failed' | 'gone'; failingSince: string; now: string } };

/** The endpoint as the admin API shows it (never its secret). */
export interface Webhook extends WebhookDefinition {
  id: string;
  organisationId: string;
  status: WebhookStatus;
  statusReason: WebhookStatusReason | null;
  failingSince: string | null;
  createdAt: string;
  updatedAt: string;
  createdBy: string;
  updatedBy: string;
}

export type WebhookState =
  | { exists: false }
  | ({
      exists: true;
      deleted: boolean;
      secretKeyId: string;
      previousSecretKeyId: string | null;
      secretRotatedAt: string | null;
    } & Webhook);

type ExistingWebhook = Extract<WebhookState, { exists: true }>;

/** A deleted endpoint, or another organisation's, is as unknown as a missing one. */
function existing(state: WebhookState, ref: WebhookRef): ExistingWebhook {
  if (!state.exists || state.deleted || state.organisationId !== ref.organisationId) throw new DomainError('not_found', `Webhook ${ref.webhookId} not found`);
  return state;
}

/** An endpoint deliveries may be asked of: not disabled. */
function deliverable(state: WebhookState, ref: WebhookRef): ExistingWebhook {
  const current = existing(state, ref);
  if (current.status === 'disabled') throw new DomainError('conflict', 'The webhook is disabled: enable it (PATCH status "enabled") first');
  return current;
}

function statusChanged(
  state: ExistingWebhook,
  to: WebhookStatus,
  reason: WebhookStatusReason,
  failingSince: string | null,
  now: string,
  actor: string,
): WebhookEvent {
  const { id: webhookId, organisationId, status: from } = state;
  return { type: 'WebhookStatusChanged', data: { webhookId, organisationId, from, to, reason, failingSince, changedAt: now, changedBy: actor } };
}

export const webhookDecider: Decider<WebhookCommand, WebhookEvent, WebhookState> = {
  initialState: { exists: false },

  decide(command, state) {
    switch (command.type) {
      case 'CreateWebhook': {
        const { actor, now, ...definition } = command.data;
        if (state.exists) throw new DomainError('conflict', `Webhook ${definition.webhookId} already exists`);
        return [{ type: 'WebhookCreated', data: { ...definition, eventTypes: distinct(definition.eventTypes), createdAt: now, createdBy: actor } }];
      }
      case 'UpdateWebhook': {
        const { webhookId, organisationId, changes, status, actor, now } = command.data;
        const current = existing(state, command.data);
        const next: Partial<WebhookDefinition> = {};
        if (changes.url !== undefined && changes.url !== current.url) next.url = changes.url;
        if (changes.eventTypes !== undefined && distinct(changes.eventTypes).join('\n') !== current.eventTypes.join('\n')) {
          next.eventTypes = distinct(changes.eventTypes);
        }
        if (changes.description !== undefined && changes.description !== current.description) next.description = changes.description;
        const events: WebhookEvent[] = [];
        if (Object.keys(next).length > 0)
          events.push({ type: 'WebhookUpdated', data: { webhookId, organisationId, changes: next, updatedAt: now, updatedBy: actor } });
        // Enabling a failing endpoint forgives its failures; an enabled one stays as it is.
        if (status === 'disabled' && current.status !== 'disabled') events.push(statusChanged(current, 'disabled', 'requested', null, now, actor));
        if (status === 'enabled' && current.status !== 'enabled') events.push(statusChanged(current, 'enabled', 'requested', null, now, actor));
        return events;
      }
      case 'RotateWebhookSecret': {
        const { webhookId, organisationId, secretKeyId, actor, now } = command.data;
        existing(state, command.data);
        return [{ type: 'WebhookSecretRotated', data: { webhookId, organisationId, secretKeyId, rotatedAt: now, rotatedBy: actor } }];
      }
      case 'DeleteWebhook': {
        const { webhookId, organisationId, actor, now } = command.data;
        existing(state, command.data);
        return [{ type: 'WebhookDeleted', data: { webhookId, organisationId, deletedAt: now, deletedBy: actor } }];
      }
      case 'RequestWebhookReplay': {
        const { actor, now, ...replay } = command.data;
        deliverable(state, command.data);
        if (replay.from !== null && replay.to !== null && Date.parse(replay.from) >= Date.parse(replay.to)) {
          throw new DomainError('invalid', 'from must be before to', ['to']);
        }
        return [{ type: 'WebhookReplayRequested', data: { ...replay, requestedAt: now, requestedBy: actor } }];
      }
      case 'RequireDeliverableWebhook':
        deliverable(state, command.data);
        return [];
      case 'RecordDeliveryOutcome': {
        const { outcome, failingSince, now } = command.data;
        if (!state.exists || state.deleted || state.status === 'disabled') return [];
        if (outcome === 'gone') return [statusChanged(state, 'disabled', 'gone', null, now, 'webhooks')];
        if (outcome === 'succeeded') return state.status === 'failing' ? [statusChanged(state, 'enabled', 'recovered', null, now, 'webhooks')] : [];
        if (state.status === 'enabled') return [statusChanged(state, 'failing', 'failing', failingSince, now, 'webhooks')];
        const since = state.failingSince ?? failingSince;
        return Date.parse(now) - Date.parse(since) >= DISABLE_AFTER_FAILING_MS ? [statusChanged(state, 'disabled', 'failing', since, now, 'webhooks')] : [];
      }
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'WebhookCreated': {
        const { webhookId, secretKeyId, createdAt, createdBy, ...definition } = event.data;
        return {
          exists: true,
          deleted: false,
          id: webhookId,
          ...definition,
          status: 'enabled',
          statusReason: null,
          failingSince: null,
          secretKeyId,
          previousSecretKeyId: null,
          secretRotatedAt: null,
          createdAt,
          createdBy,
          updatedAt: createdAt,
          updatedBy: createdBy,
        };
      }
      case 'WebhookUpdated':
        return state.exists ? { ...state, ...event.data.changes, updatedAt: event.data.updatedAt, updatedBy: event.data.updatedBy } : state;
      case 'WebhookStatusChanged': {
        if (!state.exists) return state;
        const { to, reason, failingSince, changedAt, changedBy } = event.data;
        return { ...state, status: to, statusReason: reason, failingSince, updatedAt: changedAt, updatedBy: changedBy };
      }
      case 'WebhookSecretRotated':
        if (!state.exists) return state;
        return {
          ...state,
          previousSecretKeyId: state.secretKeyId,
          secretKeyId: event.data.secretKeyId,
          secretRotatedAt: event.data.rotatedAt,
          updatedAt: event.data.rotatedAt,
          updatedBy: event.data.rotatedBy,
        };
      case 'WebhookReplayRequested':
        return state;
      case 'WebhookDeleted':
        return state.exists ? { ...state, deleted: true, updatedAt: event.data.deletedAt, updatedBy: event.data.deletedBy } : state;
    }
  },
};

export function webhookView(state: WebhookState): Webhook {
  if (!state.exists || state.deleted) throw new DomainError('not_found', 'Webhook not found');
  const { exists: _exists, deleted: _deleted, secretKeyId: _key, previousSecretKeyId: _previous, secretRotatedAt: _rotatedAt, ...webhook } = state;
  return webhook;
}

/** The secrets a message is signed with now: the current one, and the previous one for a day after a rotation. */
export function signingKeyIds(state: ExistingWebhook, now: Date): string[] {
  const graced =
    state.previousSecretKeyId !== null && state.secretRotatedAt !== null && now.getTime() - Date.parse(state.secretRotatedAt) < PREVIOUS_SECRET_GRACE_MS;
  return graced ? [state.secretKeyId, state.previousSecretKeyId!] : [state.secretKeyId];
}

function distinct(values: readonly string[]): string[] {
  return [...new Set(values)];
}

// ---------------------------------------------------------------------------------------------------------
// Deliveries

/**
 * Waits before each retry, after the 1st, 2nd... failed attempt of a cycle: exponential (x3 from 10 s,
 * capped at 8 h), each stretched or shrunk by up to 20% at random so that an endpoint that comes back is not
 * hit by every delivery at once. Eleven attempts over about 25 hours, then the delivery gives up.
 */
export const RETRY_DELAYS_SECONDS = [10, 30, 90, 270, 810, 2430, 7290, 21870, 28800, 28800] as const;
export const MAX_ATTEMPTS = RETRY_DELAYS_SECONDS.length + 1;
const JITTER = 0.2;

/** The wait after the `cycleAttempt`-th failed attempt; `jitter` in [0, 1) picks where in ±20% it falls. */
export function retryDelayMs(cycleAttempt: number, jitter: number): number {
  const base = RETRY_DELAYS_SECONDS[cycleAttempt - 1]! * 1000;
  return Math.round(base * (1 - JITTER + 2 * JITTER * jitter));
}

/** The document a receiver gets: `{type, timestamp, data}`. */
export interface WebhookPayload {
  type: WebhookEventType;
  /** When the fact happened (ISO 8601, UTC). */
  timestamp: string;
  data: Record<string, unknown>;
}

/** Where a delivery's message comes from: the recorded event of the log. */
export interface DeliverySource {
  eventId: string;
  stream: string;
  position: string;
}

export type DeliveryOutcome = 'pending' | 'succeeded' | 'failed' | 'cancelled';

interface DeliveryRef {
  deliveryId: string;
  webhookId: string;
  organisationId: string;
}

export interface AttemptResult {
  /** The receiver's HTTP status, or null when none came (refused address, timeout, connection error). */
  statusCode: number | null;
  /** Why it failed, in words, or null on a 2xx. */
  error: string | null;
  durationMs: number;
}

export type DeliveryEvent =
  | DomainEvent<
      'WebhookDeliveryRequested',
      DeliveryRef & {
        /** The `webhook-id` receivers deduplicate on: the same for every attempt, redelivery and replay of this event to this endpoint. */
        messageId: string;
        eventType: WebhookEventType;
        payload: WebhookPayload;
        source: DeliverySource;
        trigger: 'event' | 'replay';
        replayId: string | null;
        requestedAt: string;
      }
    >
  | DomainEvent<
      'WebhookDeliveryAttempted',
      DeliveryRef &
        AttemptResult & {
          attempt: number;
          attemptedAt: string;
          /** `retrying` until the cycle's attempts are spent (`failed`), or a 410 (`failed` at once). */
          outcome: 'succeeded' | 'retrying' | 'failed';
          nextAttemptAt: string | null;
        }
    >
  | DomainEvent<'WebhookDeliveryCancelled', DeliveryRef & { reason: string; cancelledAt: string }>
  | DomainEvent<'WebhookRedeliveryRequested', DeliveryRef & { attempt: number; requestedAt: string; requestedBy: string }>;

export type DeliveryCommand =
  | { type: 'RequestDelivery'; data: Extract<DeliveryEvent, { type: 'WebhookDeliveryRequested' }>['data'] }
  | { type: 'RecordDeliveryAttempt'; data: { attempt: number; attemptedAt: string; result: AttemptResult; jitter: number } }
  | { type: 'CancelDelivery'; data: { reason: string; now: string } }
  | { type: 'RequestRedelivery'; data: { webhookId: string; organisationId: string; actor: string; now: string } };

export type DeliveryState =
  | { exists: false }
  | ({
      exists: true;
      messageId: string;
      eventType: WebhookEventType;
      payload: WebhookPayload;
      attempts: number;
      lastStatusCode: number | null;
      outcome: DeliveryOutcome;
      /** The first attempt number of the current cycle (1, or the attempt a redelivery starts). */
      cycleStart: number;
      /** When the cycle's first attempt was made: how long the endpoint has been failing, if it gives up. */
      cycleStartedAt: string | null;
      nextAttemptAt: string | null;
    } & DeliveryRef);

export function isSuccess(statusCode: number | null): boolean {
  return statusCode !== null && statusCode >= 200 && statusCode < 300;
}

export const deliveryDecider: Decider<DeliveryCommand, DeliveryEvent, DeliveryState> = {
  initialState: { exists: false },

  decide(command, state) {
    switch (command.type) {
      case 'RequestDelivery':
        // Asked again (the log read again, a replay page run twice): it is the same delivery.
        return state.exists ? [] : [{ type: 'WebhookDeliveryRequested', data: command.data }];
      case 'RecordDeliveryAttempt': {
        const { attempt, attemptedAt, result, jitter } = command.data;
        if (!state.exists) throw new DomainError('not_found', 'Delivery not found');
        // Recorded already (a job run again after a crash) or no longer due: nothing new.
        if (state.outcome !== 'pending' || attempt !== state.attempts + 1) return [];
        const { deliveryId, webhookId, organisationId } = state;
        const cycleAttempt = attempt - state.cycleStart + 1;
        const outcome = isSuccess(result.statusCode) ? 'succeeded' : result.statusCode === 410 || cycleAttempt >= MAX_ATTEMPTS ? 'failed' : 'retrying';
        const nextAttemptAt = outcome === 'retrying' ? new Date(Date.parse(attemptedAt) + retryDelayMs(cycleAttempt, jitter)).toISOString() : null;
        return [{ type: 'WebhookDeliveryAttempted', data: { deliveryId, webhookId, organisationId, attempt, attemptedAt, ...result, outcome, nextAttemptAt } }];
      }
      case 'CancelDelivery': {
        if (!state.exists || state.outcome !== 'pending') return [];
        const { deliveryId, webhookId, organisationId } = state;
        return [
          { type: 'WebhookDeliveryCancelled', data: { deliveryId, webhookId, organisationId, reason: command.data.reason, cancelledAt: command.data.now } },
        ];
      }
      case 'RequestRedelivery': {
        const { webhookId, organisationId, actor, now } = command.data;
        if (!state.exists || state.webhookId !== webhookId || state.organisationId !== organisationId) throw new DomainError('not_found', 'Delivery not found');
        if (state.outcome === 'pending')
          throw new DomainError('conflict', 'The delivery is still being attempted; redeliver it once it succeeded, failed or was cancelled');
        return [
          {
            type: 'WebhookRedeliveryRequested',
            data: { deliveryId: state.deliveryId, webhookId, organisationId, attempt: state.attempts + 1, requestedAt: now, requestedBy: actor },
          },
        ];
      }
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'WebhookDeliveryRequested': {
        const { deliveryId, webhookId, organisationId, messageId, eventType, payload, requestedAt } = event.data;
        return {
          exists: true,
          deliveryId,
          webhookId,
          organisationId,
          messageId,
          eventType,
          payload,
          attempts: 0,
          lastStatusCode: null,
          outcome: 'pending',
          cycleStart: 1,
          cycleStartedAt: null,
          nextAttemptAt: requestedAt,
        };
      }
      case 'WebhookDeliveryAttempted': {
        if (!state.exists) return state;
        const { attempt, attemptedAt, statusCode, outcome, nextAttemptAt } = event.data;
        return {
          ...state,
          attempts: attempt,
          lastStatusCode: statusCode,
          outcome: outcome === 'retrying' ? 'pending' : outcome,
          cycleStartedAt: attempt === state.cycleStart ? attemptedAt : state.cycleStartedAt,
          nextAttemptAt,
        };
      }
      case 'WebhookDeliveryCancelled':
        return state.exists ? { ...state, outcome: 'cancelled', nextAttemptAt: null } : state;
      case 'WebhookRedeliveryRequested':
        return state.exists
          ? { ...state, outcome: 'pending', cycleStart: event.data.attempt, cycleStartedAt: null, nextAttemptAt: event.data.requestedAt }
          : state;
    }
  },
};
