import { Router } from 'express';
import {
  UserCreatedMeanwhile,
  autoCreateClaimDecider,
  customEventDecider,
  knownExternalUserIdDecider,
  loggedCustomEvent,
  type CustomEventCommand,
  type CustomEventEvent,
} from '../domain/custom-event.ts';
import { userDecider, type NewUserProfile } from '../domain/user.ts';
import { tenantOf } from '../infra/auth.ts';
import { customEventSchema, logCustomEventBody } from '../api/contract/custom-events.ts';
import type { EventStore } from '../infra/event-store/port.ts';
import { errorBodySchema, type ApiDescription } from '../api/api-description.ts';
import { conflict } from '../infra/http/errors.ts';
import { eventMetadata, parse } from '../api/routes.ts';
import { ID_PATTERN, newId } from '../infra/ids.ts';
import { foldStream, type CommandPart } from './command-handling.ts';
import type { ServiceContext } from '../api/context.ts';
import { createUserParts, externalUserIdStream } from './users.ts';
import { runCommand } from './run-command.ts';
import { communityChecks } from './reference-checks.ts';

export interface ResolvedUser {
  userId: string;
  externalUserId: string;
}

/** The organisation's user with this platform id, read from its stream; null when there is none. */
export async function userById(store: EventStore, organisationId: string, userId: string): Promise<ResolvedUser | null> {
  if (!ID_PATTERN.test(userId)) return null;
  const state = await foldStream(store, `user-${userId.toLowerCase()}`, userDecider);
  if (!state.exists || state.organisationId !== organisationId) return null;
  return { userId: state.id, externalUserId: state.externalUserId };
}

/**
 * The platform id first, then the external id. The external id is looked up on its claim stream (the
 * users slice's uniqueness boundary), not the `users` read model: a user created a moment ago is found,
 * with no projection lag, and the same stream decides the autoCreateUser race.
 */
async function resolveUser(store: EventStore, organisationId: string, userId: string): Promise<ResolvedUser | null> {
  const byId = await userById(store, organisationId, userId);
  if (byId) return byId;
  const [claim] = await store.readStream(externalUserIdStream(organisationId, userId), { limit: 1 });
  return claim ? { userId: (claim.data as { userId: string }).userId, externalUserId: userId } : null;
}

function blankProfile(communityId: string): NewUserProfile {
  return {
    username: null,
    displayName: null,
    email: null,
    emailVerified: false,
    fullName: null,
    parentEmail: null,
    locale: null,
    bio: null,
    profilePictureUrl: null,
    roles: [],
    isAnonymous: false,
    birthDay: null,
    birthMonth: null,
    birthYear: null,
    socialHandles: { instagram: null, loyaltyCardNumber: null, tiktok: null },
    communityIds: [communityId],
  };
}

/** Resolving and appending race with other requests creating the same user at most this many times. */
const MAX_RESOLUTIONS = 3;

export function customEventCommands(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();

  admin.route(
    router,
    {
      method: 'post',
      path: '/events/custom',
      tag: 'Events',
      summary: 'Log a custom event for a user',
      description: [
        'The user is `userId` as a platform user id, else as an external user id; unknown → 404 unless `autoCreateUser` is true, which creates the user (externalUserId = `userId`, member of `communityId`) in the same atomic append as the event, once even when requests race.',
        'Appends `CustomEventLogged` on `customevent-<eventId>`. With a `nonce` the request is idempotent per organisation: a nonce already used answers with the first result (header `idempotent-replayed: true`) and appends nothing, whatever the body. Without one, an `Idempotency-Key` header does the same per route.',
        'The response carries `x-event-position`; send it as `x-min-position` to read your write.',
      ].join('\n\n'),
      body: logCustomEventBody,
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
      const { organisationId, tokenId } = tenantOf(res);
      const { occurredAt } = eventMetadata(req, res);
      const now = occurredAt!;
      const eventId = newId();
      const logEvent = (user: ResolvedUser): CommandPart<CustomEventCommand> => ({
        stream: `customevent-${eventId}`,
        decider: customEventDecider,
        command: {
          type: 'LogCustomEvent',
          data: {
            eventId,
            organisationId,
            communityId: body.communityId,
            userId: user.userId,
            externalUserId: user.externalUserId,
            name: body.eventName,
            payload: body.payload,
            nonce: body.nonce ?? null,
            source: { type: 'api', tokenId },
            now,
          },
        },
      });

      for (let resolution = 1; ; resolution++) {
        const user = await resolveUser(ctx.store, organisationId, body.userId);
        let parts: CommandPart[];
        if (user) {
          parts = [...communityChecks(organisationId, [body.communityId]), logEvent(user)];
        } else if (body.autoCreateUser) {
          const created = { userId: newId(), externalUserId: body.userId };
          const [claim, ...rest] = createUserParts({ ...created, organisationId, profile: blankProfile(body.communityId), now });
          parts = [{ ...claim!, decider: autoCreateClaimDecider }, ...rest, logEvent(created)];
        } else {
          parts = [
            {
              stream: externalUserIdStream(organisationId, body.userId),
              decider: knownExternalUserIdDecider,
              command: { type: 'ClaimExternalUserId', data: { organisationId, externalUserId: body.userId, userId: '' } },
            },
          ];
        }
        try {
          await runCommand(ctx, req, res, {
            parts,
            respond: (events) => ({ status: 200, body: loggedCustomEvent((events[events.length - 1] as CustomEventEvent[])[0]!.data) }),
            idempotency: body.nonce === undefined ? undefined : { scope: 'nonce', key: body.nonce, replayOnMismatch: true },
          });
          return;
        } catch (error) {
          if (!(error instanceof UserCreatedMeanwhile)) throw error;
          if (resolution >= MAX_RESOLUTIONS) throw conflict('The user kept changing while this event was logged; retry');
        }
      }
    },
  );

  return router;
}
