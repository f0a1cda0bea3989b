import { DomainError, type Decider, type DomainEvent } from './decider.ts';
import { externalUserIdDecider, type ExternalUserIdCommand, type ExternalUserIdEvent } from './user.ts';

/** A JSON object a client stores with a custom event; its limits keep one event small and queryable. */
export type CustomEventPayload = Record<string, unknown>;

export const EVENT_NAME_MAX_LENGTH = 200;
export const PAYLOAD_MAX_KEYS = 100;
/** Objects and arrays inside a payload may nest this deep (the payload itself is level 1). */
export const PAYLOAD_MAX_DEPTH = 5;
export const PAYLOAD_KEY_MAX_LENGTH = 100;

/** How an event came to be logged: by an API client, or by a user redeeming a custom event link. */
export type CustomEventSource = { type: 'api'; tokenId: string } | { type: 'link'; linkId: string };

export interface CustomEventLoggedData {
  eventId: string;
  organisationId: string;
  communityId: string;
  userId: string;
  externalUserId: string;
  name: string;
  payload: CustomEventPayload;
  nonce: string | null;
  source: CustomEventSource;
  occurredAt: string;
}

export type CustomEventEvent = DomainEvent<'CustomEventLogged', CustomEventLoggedData>;

export type CustomEventCommand = { type: 'LogCustomEvent'; data: Omit<CustomEventLoggedData, 'occurredAt'> & { now: string } };

export type CustomEventState = { logged: false } | { logged: true; eventId: string };

/** What the client gets back for a logged event (POST /events/custom and a link redemption). */
export interface LoggedCustomEvent {
  id: string;
  name: string;
  userId: string;
  externalUserId: string;
  payload: CustomEventPayload;
  createdAt: string;
}

/** Problems with a payload, as messages naming the offending path; empty when it is fine. */
export function payloadProblems(payload: CustomEventPayload): string[] {
  const problems: string[] = [];
  if (Object.keys(payload).length > PAYLOAD_MAX_KEYS) problems.push(`payload: at most ${PAYLOAD_MAX_KEYS} keys`);
  // A value's path is written out only when it has a problem: `at` makes it from its parent's.
  const visit = (value: unknown, at: () => string, depth: number) => {
    if (value === null || typeof value !== 'object') return;
    if (depth > PAYLOAD_MAX_DEPTH) {
      problems.push(`${at()}: nested deeper than ${PAYLOAD_MAX_DEPTH} levels`);
      return;
    }
    if (Array.isArray(value)) {
      if (value.length > PAYLOAD_MAX_KEYS) problems.push(`${at()}: at most ${PAYLOAD_MAX_KEYS} items`);
      value.forEach((item, index) => visit(item, () => `${at()}.${index}`, depth + 1));
      return;
    }
    const keys = Object.keys(value);
    if (depth > 1 && keys.length > PAYLOAD_MAX_KEYS) problems.push(`${at()}: at most ${PAYLOAD_MAX_KEYS} keys`);
    for (const key of keys) {
      if (key.length === 0 || key.length > PAYLOAD_KEY_MAX_LENGTH) problems.push(`${at()}: keys must be 1 to ${PAYLOAD_KEY_MAX_LENGTH} characters`);
      visit((value as Record<string, unknown>)[key], () => `${at()}.${key}`, depth + 1);
    }
  };
  visit(payload, () => 'payload', 1);
  return problems;
}

/** The rules every custom event name meets, for logged events and for links alike. */
export function checkEventName(name: string): void {
  if (name.trim().length === 0) throw new DomainError('invalid', 'eventName: must not be empty');
  if (name.length > EVENT_NAME_MAX_LENGTH) throw new DomainError('invalid', `eventName: at most ${EVENT_NAME_MAX_LENGTH} characters`);
}

export function checkPayload(payload: CustomEventPayload): void {
  const problems = payloadProblems(payload);
  if (problems.length > 0) throw new DomainError('invalid', problems.join('; '));
}

/**
 * One custom event per stream (`customevent-<eventId>`). Logging the same event id again decides nothing,
 * which is what makes a retried link redemption (whose event id is derived from link and user) append once.
 */
export const customEventDecider: Decider<CustomEventCommand, CustomEventEvent, CustomEventState> = {
  initialState: { logged: false },

  decide(command, state) {
    const { eventId, organisationId, communityId, userId, externalUserId, name, payload, nonce, source, now } = command.data;
    if (state.logged) {
      if (state.eventId === eventId) return [];
      throw new DomainError('conflict', `Another event is logged as ${eventId}`);
    }
    checkEventName(name);
    checkPayload(payload);
    // Field by field (not a rest and a spread of the command's data): an object of one shape, made once a request.
    return [
      { type: 'CustomEventLogged', data: { eventId, organisationId, communityId, userId, externalUserId, name, payload, nonce, source, occurredAt: now } },
    ];
  },

  evolve(_state, event) {
    return { logged: true, eventId: event.data.eventId };
  },
};

export function loggedCustomEvent(data: CustomEventLoggedData): LoggedCustomEvent {
  return { id: data.eventId, name: data.name, userId: data.userId, externalUserId: data.externalUserId, payload: data.payload, createdAt: data.occurredAt };
}

/**
 * Another request claimed the external user id between this request's look-up and its append: the user
 * now exists, so the caller resolves again and logs the event for that user instead of creating one.
 */
export class UserCreatedMeanwhile extends DomainError {
  constructor(readonly userId: string) {
    super('conflict', `The user was created by a concurrent request as ${userId}`);
    this.name = 'UserCreatedMeanwhile';
  }
}

/** The external-id claim of a user created with `autoCreateUser`: a claim already taken is not a 409 but a re-resolve. */
export const autoCreateClaimDecider: Decider<ExternalUserIdCommand, ExternalUserIdEvent, { userId: string | null }> = {
  ...externalUserIdDecider,
  decide(command, state) {
    if (state.userId) throw new UserCreatedMeanwhile(state.userId);
    return externalUserIdDecider.decide(command, state);
  },
};

/**
 * For a user known by neither id and no `autoCreateUser`: decided on the external-id claim, after the nonce
 * check, so a replayed nonce still answers with its first result; a claim made meanwhile means re-resolve.
 */
export const knownExternalUserIdDecider: Decider<ExternalUserIdCommand, ExternalUserIdEvent, { userId: string | null }> = {
  ...externalUserIdDecider,
  decide(_command, state) {
    if (state.userId) throw new UserCreatedMeanwhile(state.userId);
    throw new DomainError('not_found', 'User not found');
  },
};
