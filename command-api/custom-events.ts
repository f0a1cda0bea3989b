import { Router, type Request } from 'express';
import { z } from 'zod';
import {
  CUSTOM_EVENT_BATCH_MAX,
  batchedCustomEventBody,
  customEventBatchResultSchema,
  customEventSchema,
  logCustomEventBatchBody,
  logCustomEventBody,
} from '../api/contract/custom-events.ts';
import { jsonProblems } from '../infra/http/accepted-input.ts';
import { errorBodySchema, type ApiDescription } from '../api/api-description.ts';
import { badRequest, zodIssues } from '../infra/http/errors.ts';
import { answerCheckedByAppend } from '../infra/auth.ts';
import { parse, setEventPosition } from '../api/routes.ts';
import type { ServiceContext } from '../api/context.ts';
import { logCustomEvent, logCustomEventBatch, type BatchedCustomEvent } from './log-custom-event.ts';
import { callerOf, headerIdempotency, respondHandled } from './run-command.ts';
import { Slots } from '../infra/slots.ts';

/** An event of a batch read on its own: bad text or a field that fails validation refuses that event, not the batch. */
function batchedEvent(item: unknown): BatchedCustomEvent {
  const problems = jsonProblems(item, 'body');
  if (problems.length > 0) return { refused: badRequest(problems) };
  const parsed = batchedCustomEventBody.safeParse(item);
  return parsed.success ? { body: parsed.data } : { refused: badRequest(zodIssues(parsed.error)) };
}

/**
 * Batches this process handles at once; the others wait their turn, as they arrived, before their events are
 * even validated. One batch of 100 events already gives the pool and the CPU enough to do (its events are
 * decided in parallel, then appended in one statement): more at once only queue on the pool, each holding
 * its decided events meanwhile. Unbounded, 64 clients sending batches kept about 70 MB of them alive (a
 * heap snapshot under that load), which V8 let grow to 200 MB and more of heap, and their reads waited for
 * a pool connection past its 1 s limit (503s); with 4 at once neither happens (bench/write-path.ts).
 */
const BATCHES_AT_ONCE = 4;

/**
 * The requests whose API token their append checks (infra/auth.ts `requireApiToken`): this file's two routes,
 * which answer through `answerCheckedByAppend`. Relative to the admin API's mount.
 */
export function tokenCheckedByAppend(req: Request): boolean {
  return req.method === 'POST' && (req.path === '/events/custom' || req.path === '/events/custom/batch');
}

export function customEventCommands(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();
  const batchSlots = new Slots(BATCHES_AT_ONCE);

  admin.route(
    router,
    {
      method: 'post',
      path: '/events/custom',
      operationId: 'logCustomEvent',
      tag: 'Events',
      summary: 'Log a custom event for a user',
      description: [
        'The user is `userId` as a platform user id, else as an external user id; unknown → 404 unless `autoCreateUser` is true, which creates the user (externalUserId = `userId`, member of `communityId`) in the same atomic append as the event, once even when requests race.',
        'Appends `CustomEventLogged` on `customevent-<eventId>`. With a `nonce` the request is idempotent per organisation: a nonce already used answers with the first result (header `idempotent-replayed: true`) and appends nothing, whatever the body. Without one, an `Idempotency-Key` header does the same per route.',
        'The response carries `x-event-position`; send it as `x-min-position` to read your write.',
      ].join('\n\n'),
      body: logCustomEventBody,
      example: {
        eventName: 'purchase',
        userId: 'customer-1',
        communityId: '6b039d2d3be9a23a28e68a12',
        payload: { amount: 12.5, sku: 'A-1' },
        nonce: 'order-1001',
      },
      headers: [
        {
          name: 'Idempotency-Key',
          description: 'Honoured when the body has no `nonce`: a retry with the same key returns the first answer and changes nothing',
        },
      ],
      responses: {
        200: { description: 'The logged event', schema: customEventSchema },
        404: {
          description: 'No user with this platform or external id, and `autoCreateUser` is false (`NOT_FOUND`, "User not found")',
          schema: errorBodySchema,
        },
      },
    },
    async (req, res) => {
      const body = parse(logCustomEventBody, req.body);
      respondHandled(res, await answerCheckedByAppend(res, (guard) => logCustomEvent(ctx, callerOf(req, res, guard), body, headerIdempotency(req, res))));
    },
  );

  admin.route(
    router,
    {
      method: 'post',
      path: '/events/custom/batch',
      operationId: 'logCustomEventBatch',
      tag: 'Events',
      summary: `Log up to ${CUSTOM_EVENT_BATCH_MAX} custom events at once`,
      description: [
        `The body is an array of 1 to ${CUSTOM_EVENT_BATCH_MAX} events, each with the fields of \`POST /events/custom\` and a \`nonce\` of its own (required). The answer is 200 with one result per event, in order: \`{status: 200, event}\` for a logged one, \`{status, error}\` (the contract's error body) for a refused one, exactly what \`POST /events/custom\` would have answered for it. Valid events are logged even when others are refused; a body that is not such an array is a 400.`,
        'Each event is idempotent on its nonce, per organisation and shared with `POST /events/custom`: a nonce already used answers with its first result and logs nothing, so a batch sent again (after a timeout, a 5xx) answers the same results and appends nothing new. A nonce repeated within one batch answers what its first event did.',
        'The accepted events are appended together, in one atomic append in the common case; bad text (a NUL, an unpaired surrogate) in one event refuses that event only. A batch counts as one request against the rate limit. The response carries `x-event-position` (the last position written); send it as `x-min-position` to read your writes. Each logged event is delivered to webhooks as `custom_event.logged`, like a single one.',
      ].join('\n\n'),
      body: logCustomEventBatchBody,
      example: [
        { eventName: 'purchase', userId: 'customer-1', communityId: '6b039d2d3be9a23a28e68a12', payload: { amount: 12.5 }, nonce: 'order-1001' },
        { eventName: 'signed-up', userId: 'customer-2', communityId: '6b039d2d3be9a23a28e68a12', autoCreateUser: true, nonce: 'signup-customer-2' },
      ],
      responses: {
        200: { description: 'One result per event, in order', schema: z.array(customEventBatchResultSchema) },
      },
    },
    async (req, res) => {
      const items: unknown = req.body;
      if (!Array.isArray(items) || items.length < 1 || items.length > CUSTOM_EVENT_BATCH_MAX) {
        throw badRequest([{ message: `body: must be an array of 1 to ${CUSTOM_EVENT_BATCH_MAX} custom events`, path: [] }]);
      }
      const { results, position } = await batchSlots.run(() =>
        answerCheckedByAppend(res, (guard) => logCustomEventBatch(ctx, callerOf(req, res, guard), items.map(batchedEvent))),
      );
      setEventPosition(res, position);
      res.status(200).json(results);
    },
  );

  return router;
}
