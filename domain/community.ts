import { DomainError, type Decider, type DomainEvent } from './decider.ts';
import type { DetailsBlock } from './localised-details.ts';

export type { DetailsBlock };

/** Localised content: a language code (`en`, `pt-BR`) → its details block. */
export type LocalisedDetails = Record<string, DetailsBlock>;

export interface CommunityDefinition {
  name: string;
  description: string | null;
  details: LocalisedDetails;
}

export interface CommunityChanges {
  name?: string;
  description?: string | null;
  /** Per language: a block replaces that language's block, null removes the language. */
  details?: Record<string, DetailsBlock | null>;
}

export type CommunityEvent =
  | DomainEvent<'CommunityCreated', CommunityDefinition & { communityId: string; organisationId: string; createdAt: string; createdBy: string }>
  | DomainEvent<
      'CommunityUpdated',
      { communityId: string; organisationId: string; changes: Partial<CommunityDefinition>; updatedAt: string; updatedBy: string }
    >;

export type CommunityCommand =
  | { type: 'CreateCommunity'; data: CommunityDefinition & { communityId: string; organisationId: string; actor: string; now: string } }
  | { type: 'UpdateCommunity'; data: { communityId: string; organisationId: string; changes: CommunityChanges; actor: string; now: string } }
  /** Another aggregate refers to this community (a user joining it): it must exist in that organisation. */
  | { type: 'RequireCommunity'; data: { communityId: string; organisationId: string } };

/** The community as the admin API returns it. */
export interface Community extends CommunityDefinition {
  id: string;
  organisationId: string;
  createdAt: string;
  updatedAt: string;
  createdBy: string;
  updatedBy: string;
}

export type CommunityState = { exists: false } | ({ exists: true } & Community);

export const communityDecider: Decider<CommunityCommand, CommunityEvent, CommunityState> = {
  initialState: { exists: false },

  decide(command, state) {
    switch (command.type) {
      case 'CreateCommunity': {
        const { actor, now, ...definition } = command.data;
        if (state.exists) throw new DomainError('conflict', `Community ${definition.communityId} already exists`);
        if (definition.name.trim().length === 0) throw new DomainError('invalid', 'A community needs a name');
        return [
          {
            type: 'CommunityCreated',
            data: { ...definition, name: definition.name.trim(), details: mergeDetails({}, definition.details), createdAt: now, createdBy: actor },
          },
        ];
      }
      case 'UpdateCommunity': {
        const { communityId, organisationId, changes, actor, now } = command.data;
        if (!state.exists || state.organisationId !== organisationId) throw new DomainError('not_found', `Community ${communityId} not found`);
        const next: Partial<CommunityDefinition> = {};
        if (changes.name !== undefined) {
          if (changes.name.trim().length === 0) throw new DomainError('invalid', 'A community needs a name');
          if (changes.name.trim() !== state.name) next.name = changes.name.trim();
        }
        if (changes.description !== undefined && changes.description !== state.description) next.description = changes.description;
        if (changes.details !== undefined) {
          const details = mergeDetails(state.details, changes.details);
          if (JSON.stringify(details) !== JSON.stringify(state.details)) next.details = details;
        }
        if (Object.keys(next).length === 0) return [];
        return [{ type: 'CommunityUpdated', data: { communityId, organisationId, changes: next, updatedAt: now, updatedBy: actor } }];
      }
      case 'RequireCommunity': {
        const { communityId, organisationId } = command.data;
        if (!state.exists || state.organisationId !== organisationId) throw new DomainError('invalid', `Community ${communityId} does not exist`);
        return [];
      }
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'CommunityCreated': {
        const { communityId, createdAt, createdBy, ...rest } = event.data;
        return { exists: true, ...rest, id: communityId, createdAt, createdBy, updatedAt: createdAt, updatedBy: createdBy };
      }
      case 'CommunityUpdated': {
        if (!state.exists) return state;
        return { ...state, ...event.data.changes, updatedAt: event.data.updatedAt, updatedBy: event.data.updatedBy };
      }
    }
  },
};

/** Languages in a stable (sorted) order, so equal content compares equal whatever order it arrived in. */
export function mergeDetails(current: LocalisedDetails, changes: Record<string, DetailsBlock | null>): LocalisedDetails {
  const merged: LocalisedDetails = { ...current };
  for (const [language, block] of Object.entries(changes)) {
    if (block === null) delete merged[language];
    else merged[language] = block;
  }
  return Object.fromEntries(Object.entries(merged).sort(([a], [b]) => a.localeCompare(b)));
}

export function communityView(state: CommunityState): Community {
  if (!state.exists) throw new DomainError('not_found', 'Community not found');
  const { exists: _exists, ...community } = state;
  return community;
}
