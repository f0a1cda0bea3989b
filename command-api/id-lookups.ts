import { actionOwnerDecider, tokenOwnerDecider, type IdOwner } from '../domain/id-lookup.ts';
import type { ChallengeEvent } from '../domain/challenge.ts';
import type { OrganisationEvent } from '../domain/organisation.ts';
import { WrongExpectedRevisionError, type EventStore, type Position } from '../infra/event-store/port.ts';
import { uuidFrom } from '../infra/ids.ts';
import type { CommandPart } from './command-handling.ts';

/**
 * The lookups that take a command from an id to the stream it lives on (see `domain/id-lookup.ts`): each is
 * a part of the command that creates the id, and is read back before a command addressed to the id. The id is
 * made for that command, so its lookup stream is new: decided unread (`newStream`).
 */
export const actionLookupStream = (actionId: string) => `challengeaction-${actionId}`;
export const tokenLookupStream = (tokenId: string) => `apitoken-${tokenId}`;

export function recordActionOwner(actionId: string, challengeId: string, organisationId: string): CommandPart {
  return {
    stream: actionLookupStream(actionId),
    newStream: true,
    decider: actionOwnerDecider,
    command: { type: 'RecordOwner', data: { id: actionId, organisationId, stream: `challenge-${challengeId}` } },
  };
}

export function recordTokenOwner(tokenId: string, organisationId: string): CommandPart {
  return {
    stream: tokenLookupStream(tokenId),
    newStream: true,
    decider: tokenOwnerDecider,
    command: { type: 'RecordOwner', data: { id: tokenId, organisationId, stream: `organisation-${organisationId}` } },
  };
}

/** The owner recorded for an id, or null: the lookup is written once, so its first event is the answer. */
export async function ownerOf(store: EventStore, lookupStream: string): Promise<IdOwner | null> {
  const [recorded] = await store.readStream(lookupStream, { limit: 1 });
  return recorded ? (recorded.data as IdOwner) : null;
}

/** The challenge an action of this organisation belongs to, or null (unknown, or another organisation's). */
export async function challengeOfAction(store: EventStore, organisationId: string, actionId: string): Promise<string | null> {
  const owner = await ownerOf(store, actionLookupStream(actionId));
  if (!owner || owner.organisationId !== organisationId || !owner.stream.startsWith('challenge-')) return null;
  return owner.stream.slice('challenge-'.length);
}

const OWNING_EVENTS = ['ChallengeCreated', 'ChallengeUpdated', 'ApiTokenIssued'] as const;
type OwningEvent = Extract<ChallengeEvent | OrganisationEvent, { type: (typeof OWNING_EVENTS)[number] }>;

/** The lookups an event that brings ids into being calls for. */
function lookupsOf(event: OwningEvent): { stream: string; type: string; owner: IdOwner }[] {
  switch (event.type) {
    case 'ChallengeCreated':
    case 'ChallengeUpdated': {
      const { challengeId, organisationId } = event.data;
      const actions = event.type === 'ChallengeCreated' ? event.data.actions : (event.data.changes.actions ?? []);
      return actions.map(({ actionId }) => ({
        stream: actionLookupStream(actionId),
        type: 'ChallengeActionRecorded',
        owner: { id: actionId, organisationId, stream: `challenge-${challengeId}` },
      }));
    }
    case 'ApiTokenIssued': {
      const { tokenId, organisationId } = event.data;
      return [
        { stream: tokenLookupStream(tokenId), type: 'ApiTokenRecorded', owner: { id: tokenId, organisationId, stream: `organisation-${organisationId}` } },
      ];
    }
  }
}

/**
 * Writes the lookups of ids created before the lookups existed, from the log: run once after upgrading
 * (`engage lookups backfill`), and again if an older instance kept writing meanwhile. Idempotent: a lookup
 * already there is left alone. Resumes after `after` when given.
 */
export async function backfillIdLookups(
  store: EventStore,
  options: { after?: Position | null; pageSize?: number } = {},
): Promise<{ scanned: number; recorded: number; through: Position | null }> {
  let after = options.after ?? null;
  let scanned = 0;
  let recorded = 0;
  for (;;) {
    const page = await store.readAll({ after, limit: options.pageSize ?? 5000, filter: { eventTypes: OWNING_EVENTS } });
    for (const event of page.events) {
      scanned++;
      for (const lookup of lookupsOf(event as unknown as OwningEvent)) {
        if (await ownerOf(store, lookup.stream)) continue;
        try {
          await store.append(
            lookup.stream,
            [
              {
                id: uuidFrom(`lookup:${lookup.stream}`),
                type: lookup.type,
                data: lookup.owner,
                metadata: { organisationId: lookup.owner.organisationId, actor: 'backfill' },
              },
            ],
            { expectedRevision: 'no_stream' },
          );
          recorded++;
        } catch (error) {
          // Recorded meanwhile, by a concurrent backfill.
          if (!(error instanceof WrongExpectedRevisionError)) throw error;
        }
      }
    }
    after = page.checkpoint ?? after;
    if (page.isEnd) return { scanned, recorded, through: after };
  }
}
