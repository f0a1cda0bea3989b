import { describe, expect, it } from 'vitest';
import {
  DISABLE_AFTER_FAILING_MS,
  MAX_ATTEMPTS,
  RETRY_DELAYS_SECONDS,
  deliveryDecider,
  eventTypePatternProblem,
  matchesEventTypes,
  retryDelayMs,
  signingKeyIds,
  webhookDecider,
  type DeliveryCommand,
  type DeliveryEvent,
  type WebhookCommand,
  type WebhookEvent,
} from '../domain/webhook.ts';
import { fold } from '../domain/decider.ts';
import { given } from './support/decider-spec.ts';

const ref = { webhookId: 'a'.repeat(24), organisationId: 'b'.repeat(24) };
const otherOrganisation = 'c'.repeat(24);
const T0 = '2026-03-01T10:00:00.000Z';
const at = (ms: number) => new Date(Date.parse(T0) + ms).toISOString();

const created: WebhookEvent = {
  type: 'WebhookCreated',
  data: {
    ...ref,
    url: 'https://hooks.example.com',
    eventTypes: ['achievement.earned'],
    description: null,
    secretKeyId: 'k1',
    createdAt: T0,
    createdBy: 'token-1',
  },
};
const status = (from: string, to: string, reason: string, failingSince: string | null, changedAt: string, changedBy = 'webhooks'): WebhookEvent =>
  ({ type: 'WebhookStatusChanged', data: { ...ref, from, to, reason, failingSince, changedAt, changedBy } }) as WebhookEvent;
const outcome = (kind: 'succeeded' | 'failed' | 'gone', failingSince: string, now: string): WebhookCommand => ({
  type: 'RecordDeliveryOutcome',
  data: { ...ref, outcome: kind, failingSince, now },
});

describe('webhook endpoint decider', () => {
  it('creates an endpoint once, its event types without repeats', () => {
    given(webhookDecider, [])
      .when({
        type: 'CreateWebhook',
        data: {
          ...ref,
          url: 'https://hooks.example.com',
          eventTypes: ['achievement.earned', 'achievement.earned'],
          description: null,
          secretKeyId: 'k1',
          actor: 'token-1',
          now: T0,
        },
      })
      .then([created]);
    given(webhookDecider, [created])
      .when({
        type: 'CreateWebhook',
        data: { ...ref, url: 'https://x.example', eventTypes: ['*'], description: null, secretKeyId: 'k2', actor: 'token-1', now: T0 },
      })
      .thenRefuses('conflict', /already exists/);
  });

  it('changes only what differs, and a status an admin asks for', () => {
    const update = (data: Partial<Extract<WebhookCommand, { type: 'UpdateWebhook' }>['data']>): WebhookCommand => ({
      type: 'UpdateWebhook',
      data: { ...ref, changes: {}, actor: 'token-2', now: at(1000), ...data },
    });
    given(webhookDecider, [created])
      .when(update({ changes: { url: 'https://hooks.example.com', eventTypes: ['achievement.earned'] } }))
      .then([]);
    given(webhookDecider, [created])
      .when(update({ changes: { eventTypes: ['*'] }, status: 'disabled' }))
      .then([
        { type: 'WebhookUpdated', data: { ...ref, changes: { eventTypes: ['*'] }, updatedAt: at(1000), updatedBy: 'token-2' } },
        status('enabled', 'disabled', 'requested', null, at(1000), 'token-2'),
      ]);
    given(webhookDecider, [created, status('enabled', 'failing', 'failing', T0, at(10))])
      .when(update({ status: 'enabled' }))
      .then([status('failing', 'enabled', 'requested', null, at(1000), 'token-2')]);
  });

  it('does not find a deleted endpoint, nor another organisation’s', () => {
    const deleted: WebhookEvent = { type: 'WebhookDeleted', data: { ...ref, deletedAt: at(5), deletedBy: 'token-1' } };
    given(webhookDecider, [created, deleted])
      .when({ type: 'DeleteWebhook', data: { ...ref, actor: 'token-1', now: at(6) } })
      .thenRefuses('not_found', /not found/);
    given(webhookDecider, [created])
      .when({ type: 'RotateWebhookSecret', data: { ...ref, organisationId: otherOrganisation, secretKeyId: 'k2', actor: 't', now: at(6) } })
      .thenRefuses('not_found', /not found/);
  });

  it('replays only on an endpoint that takes deliveries, over a range that is one', () => {
    const replay = (from: string | null, to: string | null): WebhookCommand => ({
      type: 'RequestWebhookReplay',
      data: { ...ref, replayId: 'r'.repeat(24), fromPosition: null, from, to, untilPosition: '0'.repeat(32), actor: 'token-1', now: at(9) },
    });
    given(webhookDecider, [created])
      .when(replay('2026-01-02T00:00:00.000Z', '2026-01-01T00:00:00.000Z'))
      .thenRefuses('invalid', /before/);
    given(webhookDecider, [created, status('enabled', 'disabled', 'gone', null, at(1))])
      .when(replay(null, null))
      .thenRefuses('conflict', /disabled/);
  });

  it('marks a failing endpoint after a delivery gave up, disables it after five days of it, and lets a success heal it', () => {
    const failing = status('enabled', 'failing', 'failing', T0, at(DAY));
    given(webhookDecider, [created])
      .when(outcome('failed', T0, at(DAY)))
      .then([failing]);
    given(webhookDecider, [created, failing])
      .when(outcome('failed', at(DAY), at(3 * DAY)))
      .then([]);
    given(webhookDecider, [created, failing])
      .when(outcome('failed', at(4 * DAY), at(DISABLE_AFTER_FAILING_MS)))
      .then([status('failing', 'disabled', 'failing', T0, at(DISABLE_AFTER_FAILING_MS))]);
    given(webhookDecider, [created, failing])
      .when(outcome('succeeded', at(2 * DAY), at(2 * DAY)))
      .then([status('failing', 'enabled', 'recovered', null, at(2 * DAY))]);
    given(webhookDecider, [created])
      .when(outcome('succeeded', T0, at(1)))
      .then([]);
  });

  it('disables at once on 410 Gone, and a disabled endpoint records no more outcomes', () => {
    given(webhookDecider, [created])
      .when(outcome('gone', T0, at(1)))
      .then([status('enabled', 'disabled', 'gone', null, at(1))]);
    given(webhookDecider, [created, status('enabled', 'disabled', 'requested', null, at(1), 'token-1')])
      .when(outcome('failed', T0, at(2)))
      .then([]);
  });

  it('signs with the previous secret too for a day after a rotation', () => {
    const rotated: WebhookEvent = { type: 'WebhookSecretRotated', data: { ...ref, secretKeyId: 'k2', rotatedAt: at(0), rotatedBy: 'token-1' } };
    const state = fold(webhookDecider, [created, rotated]);
    if (!state.exists) throw new Error('expected the endpoint');
    expect(signingKeyIds(state, new Date(at(DAY - 1)))).toEqual(['k2', 'k1']);
    expect(signingKeyIds(state, new Date(at(DAY)))).toEqual(['k2']);
  });
});

const DAY = 24 * 3600_000;

describe('event type subscriptions', () => {
  it('match a type, every type, or a prefix', () => {
    expect(matchesEventTypes(['reward_asset.*'], 'reward_asset.claimed')).toBe(true);
    expect(matchesEventTypes(['reward_asset.*'], 'reward_entry.awarded')).toBe(false);
    expect(matchesEventTypes(['*'], 'giveaway.drawn')).toBe(true);
    expect(matchesEventTypes(['achievement.earned'], 'achievement.earned')).toBe(true);
  });

  it('refuse what matches nothing', () => {
    expect(eventTypePatternProblem('reward_asset.*')).toBeNull();
    expect(eventTypePatternProblem('streak.extended')).toBeNull();
    expect(eventTypePatternProblem('rewards.*')).toMatch(/not an event type/);
    expect(eventTypePatternProblem('achievement')).toMatch(/not an event type/);
  });
});

const delivery = { deliveryId: 'd'.repeat(24), ...ref };
const requested: DeliveryEvent = {
  type: 'WebhookDeliveryRequested',
  data: {
    ...delivery,
    messageId: 'msg_1',
    eventType: 'achievement.earned',
    payload: { type: 'achievement.earned', timestamp: T0, data: {} },
    source: { eventId: 'e1', stream: 'engagement-1', position: '0'.repeat(32) },
    trigger: 'event',
    replayId: null,
    requestedAt: T0,
  },
};
const attempt = (n: number, attemptedAt: string, statusCode: number | null, jitter = 0.5): DeliveryCommand => ({
  type: 'RecordDeliveryAttempt',
  data: { attempt: n, attemptedAt, result: { statusCode, error: statusCode === 200 ? null : 'HTTP 500', durationMs: 5 }, jitter },
});
const attempted = (
  n: number,
  attemptedAt: string,
  statusCode: number | null,
  outcomeOf: 'succeeded' | 'retrying' | 'failed',
  nextAttemptAt: string | null,
): DeliveryEvent => ({
  type: 'WebhookDeliveryAttempted',
  data: { ...delivery, attempt: n, attemptedAt, statusCode, error: statusCode === 200 ? null : 'HTTP 500', durationMs: 5, outcome: outcomeOf, nextAttemptAt },
});

describe('delivery decider', () => {
  it('is asked for once', () => {
    given(deliveryDecider, []).when({ type: 'RequestDelivery', data: requested.data }).then([requested]);
    given(deliveryDecider, [requested]).when({ type: 'RequestDelivery', data: requested.data }).then([]);
  });

  it('retries a failure after the backoff, stretched by the jitter, and records an attempt once', () => {
    given(deliveryDecider, [requested])
      .when(attempt(1, T0, 500, 0))
      .then([attempted(1, T0, 500, 'retrying', at(8_000))]);
    given(deliveryDecider, [requested])
      .when(attempt(1, T0, 500, 0.999999))
      .then([attempted(1, T0, 500, 'retrying', at(12_000))]);
    given(deliveryDecider, [requested, attempted(1, T0, 500, 'retrying', at(10_000))])
      .when(attempt(1, T0, 500))
      .then([]);
    given(deliveryDecider, [requested, attempted(1, T0, 500, 'retrying', at(10_000))])
      .when(attempt(2, at(10_000), 200))
      .then([attempted(2, at(10_000), 200, 'succeeded', null)]);
  });

  it('gives up after the last attempt, some 25 hours on, and at once on 410', () => {
    const total = RETRY_DELAYS_SECONDS.reduce((sum, seconds) => sum + seconds, 0);
    expect(total / 3600).toBeGreaterThan(24);
    expect(total / 3600).toBeLessThan(26);
    expect(retryDelayMs(3, 0.5)).toBe(90_000);
    const history: DeliveryEvent[] = [requested];
    for (let n = 1; n < MAX_ATTEMPTS; n++) history.push(attempted(n, at(n), 500, 'retrying', at(n + 1)));
    given(deliveryDecider, history)
      .when(attempt(MAX_ATTEMPTS, at(MAX_ATTEMPTS), 503))
      .then([{ ...attempted(MAX_ATTEMPTS, at(MAX_ATTEMPTS), 503, 'failed', null) }]);
    given(deliveryDecider, [requested])
      .when(attempt(1, T0, 410))
      .then([attempted(1, T0, 410, 'failed', null)]);
  });

  it('redelivers a finished delivery with a fresh cycle of retries, never a pending one', () => {
    const done = attempted(1, T0, 200, 'succeeded', null);
    const redeliver: DeliveryCommand = { type: 'RequestRedelivery', data: { ...ref, actor: 'token-1', now: at(60_000) } };
    const redelivered: DeliveryEvent = {
      type: 'WebhookRedeliveryRequested',
      data: { ...delivery, attempt: 2, requestedAt: at(60_000), requestedBy: 'token-1' },
    };
    given(deliveryDecider, [requested, done]).when(redeliver).then([redelivered]);
    given(deliveryDecider, [requested])
      .when(redeliver)
      .thenRefuses('conflict', /still being attempted/);
    given(deliveryDecider, [requested, done])
      .when({ type: 'RequestRedelivery', data: { ...ref, organisationId: otherOrganisation, actor: 't', now: T0 } })
      .thenRefuses('not_found', /not found/);
    // The redelivery's first attempt is attempt 2, the first of its cycle: it retries after 10 s again.
    given(deliveryDecider, [requested, done, redelivered])
      .when(attempt(2, at(60_000), 500))
      .then([attempted(2, at(60_000), 500, 'retrying', at(70_000))]);
  });

  it('cancels a pending delivery once, and nothing else', () => {
    const cancel: DeliveryCommand = { type: 'CancelDelivery', data: { reason: 'the webhook was deleted', now: at(1) } };
    given(deliveryDecider, [requested])
      .when(cancel)
      .then([{ type: 'WebhookDeliveryCancelled', data: { ...delivery, reason: 'the webhook was deleted', cancelledAt: at(1) } }]);
    given(deliveryDecider, [requested, attempted(1, T0, 200, 'succeeded', null)])
      .when(cancel)
      .then([]);
  });
});
