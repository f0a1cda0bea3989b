import { z } from 'zod';
import { EVENT_NAME_MAX_LENGTH } from '../../domain/custom-event.ts';
import { pagination } from '../../infra/http/pagination.ts';
import { dateTime, hexId } from './common.ts';

/** `GET /integration/events`: filters on top of pagination; `from`/`to` are a half-open range of `createdAt`. */
export const eventsQuery = pagination
  .extend({
    userId: z
      .string()
      .trim()
      .min(1)
      .max(200)
      .optional()
      .describe("one user's events: the platform user id or the external user id, a platform id tried first (404 if the organisation has neither)"),
    communityId: hexId
      .transform((id) => id.toLowerCase())
      .optional()
      .describe("one community's events (404 if the organisation has no such community)"),
    name: z.string().trim().min(1).max(EVENT_NAME_MAX_LENGTH).optional().describe('events of this name (exact match)'),
    from: dateTime.optional().describe('events logged at or after this instant (ISO 8601 date-time, or a date: its midnight UTC)'),
    to: dateTime.optional().describe('events logged before this instant (exclusive)'),
  })
  .refine((query) => query.from === undefined || query.to === undefined || query.from <= query.to, {
    error: 'from must not be after to',
    path: ['from'],
  });

export const eventRecordSchema = z
  .object({
    id: hexId.describe('the event id'),
    nonce: z.string().nullable().describe('the nonce the event was logged with; null when it had none (always for a link redemption)'),
    createdAt: z.string().describe('ISO date-time the event was logged'),
    organisationId: hexId,
    communityId: hexId,
    userId: hexId.describe('the platform id of the user it was logged for'),
    eventSourceId: z
      .string()
      .describe('what logged it: the id of the API token that called `POST /admin/events/custom`, or of the custom event link a user redeemed'),
    payload: z
      .object({ name: z.string().describe('the event name') })
      .catchall(z.unknown())
      .describe('`name` (the event name), then the keys of the payload it was logged with; a payload key called `name` is shown as the event name'),
    tags: z.array(z.string()).describe('how it was logged: `custom`, plus `link` for a link redemption'),
  })
  .meta({ id: 'EventRecord', description: 'A logged custom event. Every field is present.' });

export type EventRecord = z.infer<typeof eventRecordSchema>;
