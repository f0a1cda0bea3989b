import { z } from 'zod';
import { WEBHOOK_EVENT_TYPES, eventTypePatternProblem } from '../../domain/webhook.ts';
import { pagination } from '../../infra/http/pagination.ts';
import { dateTime, hexId } from './common.ts';

const webhookUrl = z
  .string()
  .max(2048)
  .refine(
    (value) => {
      try {
        const url = new URL(value);
        return (url.protocol === 'https:' || url.protocol === 'http:') && url.hostname !== '';
      } catch {
        return false;
      }
    },
    { error: 'must be an http:// or https:// URL' },
  )
  .describe('where messages are POSTed; https:// unless the receiver is on your own network');

const eventTypes = z
  .array(z.string().min(1).max(100))
  .min(1)
  .max(50)
  .superRefine((patterns, ctx) => {
    patterns.forEach((pattern, index) => {
      const problem = eventTypePatternProblem(pattern);
      if (problem) ctx.addIssue({ code: 'custom', message: problem, path: [index] });
    });
  })
  .describe(
    `event types to receive: ${WEBHOOK_EVENT_TYPES.map((type) => `\`${type}\``).join(', ')}; \`*\` for every type, or a prefix such as \`reward_asset.*\``,
  );

const description = z.string().max(2000).nullable();

export const createWebhookBody = z
  .object({ url: webhookUrl, eventTypes, description: description.default(null) })
  .strict()
  .meta({
    id: 'CreateWebhook',
    description: 'Required: url, eventTypes.',
  });

export const updateWebhookBody = z
  .object({
    url: webhookUrl.optional(),
    eventTypes: eventTypes.optional(),
    description: description.optional(),
    status: z
      .enum(['enabled', 'disabled'])
      .optional()
      .describe('`disabled` stops new deliveries (pending ones are cancelled); `enabled` starts them again and forgives past failures'),
  })
  .strict()
  .refine((body) => Object.keys(body).length > 0, { error: 'give at least one field to change' })
  .meta({ id: 'UpdateWebhook', description: 'Fields left out stay as they are. An update that changes nothing appends nothing.' });

export const webhookSchema = z
  .object({
    id: hexId,
    organisationId: hexId,
    url: z.string(),
    eventTypes: z.array(z.string()),
    description: z.string().nullable(),
    status: z
      .enum(['enabled', 'failing', 'disabled'])
      .describe('`failing`: a delivery failed through a whole day of retries (deliveries go on); `disabled`: nothing is delivered'),
    statusReason: z
      .enum(['requested', 'gone', 'failing', 'recovered'])
      .nullable()
      .describe(
        'why the status last changed: an admin asked, the receiver answered 410 Gone, deliveries kept failing (5 days: disabled), or one succeeded again',
      ),
    failingSince: z.string().nullable().describe('while failing (or disabled for failing): when the first delivery that gave up was first attempted'),
    createdAt: z.string(),
    updatedAt: z.string(),
    createdBy: z.string().describe('id of the API token that created it'),
    updatedBy: z.string().describe('who changed it last: an API token id, or `webhooks` for a change of health'),
  })
  .meta({ id: 'Webhook' });

export const webhookWithSecretSchema = webhookSchema
  .extend({
    secret: z
      .string()
      .describe('the signing secret (`whsec_` and base64): shown on creation and rotation only; verify `webhook-signature` with it (Standard Webhooks)'),
  })
  .meta({ id: 'WebhookWithSecret' });

const notAPosition = 'must be a position of the log: 32 lowercase hexadecimal characters';
const position = z
  .string()
  .length(32, { error: notAPosition, abort: true })
  .regex(/^[0-9a-f]{32}$/, notAPosition)
  .describe('a position of the log (32 hex), as `x-event-position` or a delivery’s `source.position` give it');

export const replayWebhookBody = z
  .object({
    fromPosition: position.optional().describe('replay the events after this position (exclusive); default: the start of the log'),
    from: dateTime.optional().describe('only events recorded at or after this time'),
    to: dateTime.optional().describe('only events recorded before this time'),
  })
  .strict()
  .meta({ id: 'ReplayWebhook', description: 'Every field is optional: an empty body replays the whole log.' });

export const webhookReplaySchema = z
  .object({
    replayId: hexId,
    webhookId: hexId,
    fromPosition: z.string().nullable(),
    from: z.string().nullable(),
    to: z.string().nullable(),
    untilPosition: z.string().nullable().describe('the head of the log when asked: later events are delivered as they happen'),
    requestedAt: z.string(),
  })
  .meta({ id: 'WebhookReplay' });

export const redeliverySchema = z
  .object({
    deliveryId: hexId,
    webhookId: hexId,
    attempt: z.number().int().describe('the number the next attempt will have'),
    requestedAt: z.string(),
  })
  .meta({ id: 'WebhookRedelivery' });

const attemptSchema = z.object({
  attempt: z.number().int(),
  attemptedAt: z.string(),
  statusCode: z.number().int().nullable().describe('the receiver’s HTTP status; null when none came'),
  error: z.string().nullable().describe('why it failed (`HTTP 500`, `no answer within 10 s`, a refused address...); null on success'),
  durationMs: z.number().int(),
});

export const deliverySchema = z
  .object({
    id: hexId,
    webhookId: hexId,
    messageId: z.string().describe('the `webhook-id` header: the same for every attempt, redelivery and replay of this event to this endpoint'),
    eventType: z.enum(WEBHOOK_EVENT_TYPES),
    payload: z.object({ type: z.enum(WEBHOOK_EVENT_TYPES), timestamp: z.string(), data: z.record(z.string(), z.unknown()) }).describe('the body sent'),
    source: z.object({ eventId: z.string(), stream: z.string(), position: z.string() }).describe('the recorded event of the log it tells of'),
    trigger: z.enum(['event', 'replay']),
    replayId: hexId.nullable(),
    outcome: z
      .enum(['pending', 'succeeded', 'failed', 'cancelled'])
      .describe('`pending` while attempts remain; `failed` after the last retry or a 410; `cancelled` when the endpoint was disabled or deleted first'),
    attemptCount: z.number().int(),
    lastStatusCode: z.number().int().nullable(),
    lastError: z.string().nullable(),
    lastAttemptAt: z.string().nullable(),
    nextAttemptAt: z.string().nullable(),
    attempts: z.array(attemptSchema).describe('every attempt, first first'),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'WebhookDelivery' });

export const deliveriesQuery = pagination.extend({
  outcome: z.enum(['pending', 'succeeded', 'failed', 'cancelled']).optional().describe('only deliveries with this outcome'),
});
