import { DomainError, type Decider, type DomainEvent } from './decider.ts';

/**
 * Where an id that names no stream of its own lives: an action lives on its challenge's stream, an API
 * token on its organisation's. A small stream per id records its owner, appended atomically with the event
 * that brings the id into being, so a command addressed to the id finds the owner's stream at once (a read
 * model would only know it once it has caught up).
 */
export interface IdOwner {
  id: string;
  organisationId: string;
  /** The stream the id lives on. */
  stream: string;
}

export type IdLookupEvent<Type extends string> = DomainEvent<Type, IdOwner>;
export type IdLookupCommand = { type: 'RecordOwner'; data: IdOwner };
export type IdLookupState = IdOwner | null;

function idLookupDecider<Type extends string>(eventType: Type): Decider<IdLookupCommand, IdLookupEvent<Type>, IdLookupState> {
  return {
    initialState: null,
    decide({ data }, owner) {
      if (owner === null) return [{ type: eventType, data }];
      // Recording the same owner again (a retried or backfilled append) changes nothing.
      if (owner.stream === data.stream && owner.organisationId === data.organisationId) return [];
      throw new DomainError('conflict', `${data.id} already belongs to ${owner.stream}`);
    },
    evolve: (_owner, event) => event.data,
  };
}

/** `challengeaction-<actionId>`: the challenge an action belongs to. */
export const actionOwnerDecider = idLookupDecider('ChallengeActionRecorded');
/** `apitoken-<tokenId>`: the organisation a token belongs to. */
export const tokenOwnerDecider = idLookupDecider('ApiTokenRecorded');

export const ID_LOOKUP_EVENTS = ['ChallengeActionRecorded', 'ApiTokenRecorded'] as const;
