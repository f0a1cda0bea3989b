import { z } from 'zod';
import { EVENT_NAME_MAX_LENGTH, PAYLOAD_KEY_MAX_LENGTH, PAYLOAD_MAX_DEPTH, PAYLOAD_MAX_KEYS, payloadProblems } from '../../domain/custom-event.ts';
import { LINK_MAX_EXPIRY_SECONDS } from '../../domain/custom-event-link.ts';
import { errorBodySchema } from '../api-description.ts';
import { hexId, whenValid } from './common.ts';

const eventName = z.string().trim().min(1).max(EVENT_NAME_MAX_LENGTH).describe('name of the custom event (trimmed); actions match it by key');

const payload = z
  .record(z.string().max(PAYLOAD_KEY_MAX_LENGTH), z.unknown())
  .superRefine((value, ctx) => {
    for (const message of payloadProblems(value)) ctx.addIssue({ code: 'custom', message });
  }, whenValid)
  .describe(
    `any JSON key/value pairs stored with the event: at most ${PAYLOAD_MAX_KEYS} keys (and items) per object (array), keys of 1 to ${PAYLOAD_KEY_MAX_LENGTH} characters, nested at most ${PAYLOAD_MAX_DEPTH} levels deep`,
  );

const lowerHexId = hexId.transform((id) => id.toLowerCase());

export const logCustomEventBody = z
  .object({
    eventName,
    payload: payload.default({}),
    userId: z
      .string()
      .trim()
      .min(1)
      .max(200)
      .describe('the platform user id (24 hex) or the external user id (trimmed, as `POST /users` stores it); a platform id is tried first'),
    nonce: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .describe('makes the request idempotent per organisation: a nonce already used answers with the first result and logs nothing'),
    communityId: lowerHexId.describe('a community of the organisation (else 400)'),
    autoCreateUser: z.boolean().default(false).describe('true: a user unknown by both ids is created with externalUserId = userId, atomically with the event'),
  })
  .strict()
  .meta({ id: 'LogCustomEvent', description: 'Required: eventName, userId, communityId.' });

export type LogCustomEventBody = z.infer<typeof logCustomEventBody>;

/** At most this many events in one `POST /events/custom/batch`. */
export const CUSTOM_EVENT_BATCH_MAX = 100;

/** One event of a batch: the fields of `POST /events/custom`, with its `nonce` required (a batch is retried whole). */
export const batchedCustomEventBody = logCustomEventBody
  .extend({
    nonce: z
      .string()
      .min(1)
      .max(200)
      .describe(
        'required: makes the event idempotent per organisation (shared with `POST /events/custom`); a nonce already used answers with its first result',
      ),
  })
  .strict()
  .meta({ id: 'BatchedCustomEvent', description: 'Required: eventName, userId, communityId, nonce.' });

export const logCustomEventBatchBody = z
  .array(batchedCustomEventBody)
  .min(1)
  .max(CUSTOM_EVENT_BATCH_MAX)
  .meta({ id: 'LogCustomEventBatch', description: `1 to ${CUSTOM_EVENT_BATCH_MAX} custom events, each accepted or refused on its own` });

export const customEventSchema = z
  .object({
    id: hexId.describe('the event id'),
    name: z.string(),
    userId: hexId.describe('the platform user id'),
    externalUserId: z.string(),
    payload: z.record(z.string(), z.unknown()),
    createdAt: z.string().describe('ISO date-time the event was logged'),
  })
  .meta({ id: 'CustomEvent' });

export const customEventBatchResultSchema = z
  .object({
    status: z.number().int().describe('what `POST /events/custom` would have answered for this event: 200, or the 4xx of its error'),
    event: customEventSchema.optional().describe('the logged event (the first one, for a nonce already used), when status is 200'),
    error: errorBodySchema.optional().describe('why the event was refused, when status is not 200'),
  })
  .meta({ id: 'CustomEventBatchResult' });

export const createCustomEventLinkBody = z
  .object({
    eventName,
    payload: payload.default({}),
    communityId: lowerHexId.describe('a community of the organisation (else 400)'),
    expiryTime: z.number().int().min(1).max(LINK_MAX_EXPIRY_SECONDS).describe('seconds from now until the link expires (at most a year)'),
    isSingleUse: z.boolean().default(true).describe('true: only the first user to redeem it can; false: every user, once each'),
  })
  .strict()
  .meta({ id: 'CreateCustomEventLink', description: 'Required: eventName, communityId, expiryTime.' });

export const customEventLinkSchema = z
  .object({
    url: z.string().describe('`https://<domain>/l/<token>`: the request’s domain, and a token of the link id and an HMAC-SHA256 signature'),
  })
  .meta({ id: 'CustomEventLink' });

export const redeemCustomEventLinkBody = z
  .object({
    token: z.string().min(1).max(200).describe('the part of the link URL after `/l/`'),
  })
  .strict()
  .meta({ id: 'RedeemCustomEventLink' });
