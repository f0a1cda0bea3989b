import { createHash } from 'node:crypto';
import { Router } from 'express';
import { customEventDecider } from '../domain/custom-event.ts';
import { LinkExpired, customEventLinkDecider, existingLink, redeemedEvent, type CustomEventLinkEvent } from '../domain/custom-event-link.ts';
import { tenantOf } from '../infra/auth.ts';
import { createCustomEventLinkBody, customEventLinkSchema, customEventSchema, redeemCustomEventLinkBody } from '../api/contract/custom-events.ts';
import { errorBodySchema, type ApiDescription } from '../api/api-description.ts';
import { gone, notFound } from '../infra/http/errors.ts';
import { eventMetadata, idempotencyKeyHeader, parse } from '../api/routes.ts';
import { newId } from '../infra/ids.ts';
import { linkIdOf, linkSigningKey, linkToken, verifyLinkToken } from '../infra/link-signing.ts';
import { requireUser, signedInUserOf } from '../infra/require-user.ts';
import { userTokenKey } from '../infra/user-tokens.ts';
import { aggregateStream } from './command-handling.ts';
import type { ServiceContext } from '../api/context.ts';
import { userById } from './log-custom-event.ts';
import { communityChecks } from './reference-checks.ts';
import { withDecidedState } from './decided-state.ts';
import { runCommand } from './run-command.ts';

/**
 * The id of the event a user's redemption logs, derived from link and user: a retried or concurrent
 * redemption by the same user decides the same `customevent-<id>` stream, so it is appended once.
 */
export function redemptionEventId(linkId: string, userId: string): string {
  return createHash('sha256').update(`${linkId}\n${userId}`).digest('hex').slice(0, 24);
}

export function customEventLinkCommands(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();
  const key = linkSigningKey(ctx.config);

  admin.route(
    router,
    {
      method: 'post',
      path: '/events/custom/link',
      operationId: 'createCustomEventLink',
      tag: 'Events',
      summary: 'Create a link that logs a custom event for the user who follows it',
      description: [
        'Appends `CustomEventLinkCreated` on `link-<id>`. The URL is `https://<domain>/l/<linkId>.<signature>` on the domain of this request, the signature an HMAC-SHA256 of the link id and its expiry with a service secret.',
        'The front end sends the part after `/l/` to the integration API (`POST /events/custom/links/redeem`) for the signed-in user; the event is then logged for that user, once per user. It expires `expiryTime` seconds from now (then 410); a single-use link accepts one user (others get 409).',
      ].join('\n\n'),
      body: createCustomEventLinkBody,
      example: { eventName: 'scanned-poster', communityId: '6b039d2d3be9a23a28e68a12', expiryTime: 86400, isSingleUse: false },
      headers: [idempotencyKeyHeader],
      responses: { 201: { description: 'The signed link', schema: customEventLinkSchema } },
    },
    async (req, res) => {
      const body = parse(createCustomEventLinkBody, req.body);
      const { organisationId, domain } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      const linkId = newId();
      await runCommand(ctx, req, res, {
        parts: [
          {
            stream: `link-${linkId}`,
            newStream: true,
            decider: customEventLinkDecider,
            command: {
              type: 'CreateCustomEventLink',
              data: {
                linkId,
                organisationId,
                communityId: body.communityId,
                name: body.eventName,
                payload: body.payload,
                isSingleUse: body.isSingleUse,
                expiryTime: body.expiryTime,
                actor: actor!,
                now: occurredAt!,
              },
            },
          },
          ...communityChecks(organisationId, [body.communityId]),
        ],
        respond: ([events]) => {
          const created = (events as CustomEventLinkEvent[])[0]!;
          if (created.type !== 'CustomEventLinkCreated') throw new Error('A new link starts with CustomEventLinkCreated');
          return { status: 201, body: { url: `https://${domain}/l/${linkToken(key, linkId, created.data.expiresAt)}` } };
        },
      });
    },
  );

  return router;
}

const userTokenHeader = {
  name: 'Authorization',
  description: '`Bearer <user token>`, issued by the admin API (`POST /users/{userId}/tokens`); missing, invalid, expired or another organisation’s → 401',
  required: true,
};

export function customEventLinkRedemption(ctx: ServiceContext, integration: ApiDescription): Router {
  const router = Router();
  const key = linkSigningKey(ctx.config);

  integration.route(
    router,
    {
      method: 'post',
      path: '/events/custom/links/redeem',
      operationId: 'redeemCustomEventLink',
      tag: 'Events',
      summary: 'Redeem a custom event link for the signed-in user',
      description: [
        'Logs the link’s event for the signed-in user (`CustomEventLinkRedeemed` on `link-<id>` and `CustomEventLogged` on `customevent-<eventId>`, in one atomic append decided on the link’s revision).',
        'Once per user: redeeming again answers 200 with the first result and appends nothing. A single-use link redeemed by another user is a 409, even when both redeem at the same moment.',
      ].join('\n\n'),
      body: redeemCustomEventLinkBody,
      headers: [userTokenHeader, idempotencyKeyHeader],
      responses: {
        200: { description: 'The event logged for the user (the first one, on a repeat)', schema: customEventSchema },
        404: { description: 'Unknown link, another organisation’s, or a token whose signature does not verify (`NOT_FOUND`)', schema: errorBodySchema },
        409: { description: 'A single-use link another user already redeemed (`CONFLICT`)', schema: errorBodySchema },
        410: { description: 'The link has expired (`GONE`)', schema: errorBodySchema },
      },
    },
    requireUser(userTokenKey(ctx.config)),
    async (req, res) => {
      const { token } = parse(redeemCustomEventLinkBody, req.body);
      const { organisationId } = tenantOf(res);
      const { userId } = signedInUserOf(res);
      const { occurredAt } = eventMetadata(req, res);
      const linkId = linkIdOf(token);
      if (!linkId) throw notFound('Link not found');
      // A link's definition and expiry never change, so the signature is checked once, before deciding.
      const link = await aggregateStream(ctx.store, `link-${linkId}`, customEventLinkDecider);
      if (!link.exists || link.organisationId !== organisationId || !verifyLinkToken(key, token, linkId, link.expiresAt)) throw notFound('Link not found');
      const user = await userById(ctx.store, organisationId, userId);
      if (!user) throw notFound('User not found');
      const eventId = redemptionEventId(linkId, user.userId);
      const tracked = withDecidedState(customEventLinkDecider);
      try {
        await runCommand(ctx, req, res, {
          parts: [
            {
              stream: `link-${linkId}`,
              decider: tracked.decider,
              command: { type: 'RedeemCustomEventLink', data: { linkId, organisationId, ...user, eventId, now: occurredAt! } },
            },
            {
              stream: `customevent-${eventId}`,
              decider: customEventDecider,
              command: {
                type: 'LogCustomEvent',
                data: {
                  eventId,
                  organisationId,
                  communityId: link.communityId,
                  ...user,
                  name: link.name,
                  payload: link.payload,
                  nonce: null,
                  source: { type: 'link', linkId },
                  now: occurredAt!,
                },
              },
            },
          ],
          respond: ([events]) => ({ status: 200, body: redeemedEvent(existingLink(tracked.after(events!), { linkId, organisationId }), user.userId) }),
        });
      } catch (error) {
        if (error instanceof LinkExpired) throw gone(error.message);
        throw error;
      }
    },
  );

  return router;
}
