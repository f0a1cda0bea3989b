import {
  UserCreatedMeanwhile,
  autoCreateClaimDecider,
  customEventDecider,
  knownExternalUserIdDecider,
  loggedCustomEvent,
  type CustomEventCommand,
  type CustomEventEvent,
  type LoggedCustomEvent,
} from '../domain/custom-event.ts';
import { blankProfile, externalUserIdDecider, userDecider } from '../domain/user.ts';
import type { LogCustomEventBody } from '../api/contract/custom-events.ts';
import type { EventStore, Position } from '../infra/event-store/port.ts';
import { conflict, knownErrorAnswer, type ErrorBody } from '../infra/http/errors.ts';
import { ID_PATTERN, newId } from '../infra/ids.ts';
import {
  aggregateStream,
  parsedFingerprintOf,
  handleCommand,
  handleCommandBatch,
  type BatchCommand,
  type CommandPart,
  type Handled,
  type Idempotency,
} from './command-handling.ts';
import type { Caller, ServiceContext } from '../api/context.ts';
import { communityChecks } from './reference-checks.ts';
import { createUserParts, externalUserIdStream } from './users.ts';
import { streamStatesOf } from './stream-states.ts';

export interface ResolvedUser {
  userId: string;
  externalUserId: string;
}

/** The organisation's user with this platform id, from its stream (a user's organisation and external id never change); null when there is none. */
export async function userById(store: EventStore, organisationId: string, userId: string): Promise<ResolvedUser | null> {
  if (!ID_PATTERN.test(userId)) return null;
  const state = await aggregateStream(store, `user-${userId.toLowerCase()}`, userDecider, { lasting: (user) => user.exists });
  if (!state.exists || state.organisationId !== organisationId) return null;
  return { userId: state.id, externalUserId: state.externalUserId };
}

/**
 * The platform id first, then the external id. The external id is looked up on its claim stream (the
 * users slice's uniqueness boundary), not the `users` read model: a user created a moment ago is found,
 * with no projection lag, and the same stream decides the autoCreateUser race. A claim is never released.
 */
export async function resolveUser(store: EventStore, organisationId: string, userId: string): Promise<ResolvedUser | null> {
  const byId = await userById(store, organisationId, userId);
  if (byId) return byId;
  const claim = await aggregateStream(store, externalUserIdStream(organisationId, userId), externalUserIdDecider, {
    lasting: (state) => state.userId !== null,
  });
  return claim.userId ? { userId: claim.userId, externalUserId: userId } : null;
}

/** Resolving and appending race with other requests creating the same user at most this many times. */
const MAX_RESOLUTIONS = 3;

/** A decided custom event: its parts, its answer and its idempotency, ready to append alone or with others. */
export interface CustomEventDecision {
  parts: CommandPart[];
  respond: (events: CustomEventEvent[][]) => { status: number; body: unknown };
  idempotency: Idempotency | undefined;
}

/** The idempotency of a custom event: its nonce (per organisation, whatever the body), else the caller's `Idempotency-Key`. */
export function customEventIdempotency(caller: Caller, body: LogCustomEventBody, fallback?: Idempotency): Idempotency | undefined {
  if (body.nonce === undefined) return fallback;
  return { organisationId: caller.organisationId, scope: 'nonce', key: body.nonce, fingerprint: parsedFingerprintOf(body), replayOnMismatch: true };
}

/**
 * The parts of logging `body`: the user resolved on the streams (created atomically with the event when
 * `autoCreateUser` asks), the community checked, the event on a new stream of its own.
 */
export async function customEventParts(ctx: ServiceContext, caller: Caller, body: LogCustomEventBody, firstResolution = true): Promise<CommandPart[]> {
  const { organisationId, tokenId } = caller;
  const now = caller.metadata.occurredAt ?? ctx.clock.now().toISOString();
  const eventId = newId();
  const logEvent = (user: ResolvedUser): CommandPart<CustomEventCommand> => ({
    stream: `customevent-${eventId}`,
    newStream: true,
    keep: false,
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
  const claimUnread = body.autoCreateUser === true && firstResolution && !streamStatesOf(ctx.store).has(externalUserIdStream(organisationId, body.userId));
  const user = claimUnread ? await userById(ctx.store, organisationId, body.userId) : await resolveUser(ctx.store, organisationId, body.userId);
  if (user) return [...communityChecks(organisationId, [body.communityId]), logEvent(user)];
  if (body.autoCreateUser) {
    const created = { userId: newId(), externalUserId: body.userId };
    const [claim, userPart, ...rest] = createUserParts({ ...created, organisationId, profile: blankProfile(body.communityId), now });
    // An external id this process knows nothing of is claimed unread, as a new stream: a claim that exists
    // (made elsewhere, or dropped from this process's states) is then a conflict, decided again on the claim
    // read (UserCreatedMeanwhile) and resolved again, reading. A new user's request saves the claim's read;
    // an existing user's first request in this process pays an append refused instead.
    return [{ ...claim!, decider: autoCreateClaimDecider, newStream: claimUnread }, userPart!, ...rest, logEvent(created)];
  }
  return [
    {
      stream: externalUserIdStream(organisationId, body.userId),
      decider: knownExternalUserIdDecider,
      command: { type: 'ClaimExternalUserId', data: { organisationId, externalUserId: body.userId, userId: '' } },
    },
  ];
}

/** The answer of a logged custom event: the event, as its part (always the last) decided it. */
export const respondLogged = (events: unknown[][]) => ({ status: 200, body: loggedCustomEvent((events[events.length - 1] as CustomEventEvent[])[0]!.data) });

/**
 * `POST /events/custom` as a use case: resolve the user, decide and append (idempotent on the nonce, else
 * on `idempotency`), and resolve again when another request created the same user meanwhile.
 */
export async function logCustomEvent(ctx: ServiceContext, caller: Caller, body: LogCustomEventBody, idempotency?: Idempotency): Promise<Handled> {
  const keyed = customEventIdempotency(caller, body, idempotency);
  for (let resolution = 1; ; resolution++) {
    const parts = await customEventParts(ctx, caller, body, resolution === 1);
    try {
      return await handleCommand(ctx.store, parts, caller.metadata, respondLogged, keyed, { guard: caller.appendGuard });
    } catch (error) {
      if (!(error instanceof UserCreatedMeanwhile)) throw error;
      if (resolution >= MAX_RESOLUTIONS) throw conflict('The user kept changing while this event was logged; retry');
    }
  }
}

/** An event of a batch as the route read it: a valid body, or why it is refused (an error the contract answers). */
export type BatchedCustomEvent = { body: LogCustomEventBody } | { refused: unknown };

/** What a batch answers for one event: what `POST /events/custom` would have answered for it. */
export interface CustomEventBatchResult {
  status: number;
  event?: LoggedCustomEvent;
  error?: ErrorBody;
}

/**
 * `POST /events/custom/batch` as a use case: every valid event decided, the accepted ones appended together
 * (`handleCommandBatch`: one atomic append in the common case), each refused one answered on its own. An
 * event whose nonce came earlier in the same batch answers what that one did. An unexpected failure (a
 * store unavailable) fails the whole batch; a retry of it is safe, every event having its nonce.
 */
export async function logCustomEventBatch(
  ctx: ServiceContext,
  caller: Caller,
  items: readonly BatchedCustomEvent[],
): Promise<{ results: CustomEventBatchResult[]; position: Position | null }> {
  const firstWithNonce = new Map<string, number>();
  const commands: { index: number; body: LogCustomEventBody }[] = [];
  for (const [index, item] of items.entries()) {
    if (!('body' in item)) continue;
    const nonce = item.body.nonce!;
    if (firstWithNonce.has(nonce)) continue;
    firstWithNonce.set(nonce, index);
    commands.push({ index, body: item.body });
  }
  const batch = await Promise.all(
    commands.map(async ({ body }): Promise<BatchCommand> => ({
      parts: await customEventParts(ctx, caller, body),
      respond: respondLogged,
      idempotency: customEventIdempotency(caller, body),
      alone: () => logCustomEvent(ctx, caller, body),
    })),
  );
  const outcomes = await handleCommandBatch(ctx.store, batch, caller.metadata, { guard: caller.appendGuard });
  const byIndex = new Map<number, CustomEventBatchResult>();
  let position: Position | null = null;
  for (const [at, outcome] of outcomes.entries()) {
    if ('handled' in outcome) {
      const { response, position: written } = outcome.handled;
      byIndex.set(commands[at]!.index, { status: response.status, event: response.body as LoggedCustomEvent });
      if (written !== null && (position === null || written > position)) position = written;
    } else {
      byIndex.set(commands[at]!.index, refusal(outcome.error));
    }
  }
  const results = items.map((item, index) => {
    if (!('body' in item)) return refusal(item.refused);
    return byIndex.get(index) ?? byIndex.get(firstWithNonce.get(item.body.nonce!)!)!;
  });
  return { results, position };
}

function refusal(error: unknown): CustomEventBatchResult {
  const answer = knownErrorAnswer(error);
  if (!answer || answer.status >= 500) throw error;
  return { status: answer.status, error: answer.body };
}
