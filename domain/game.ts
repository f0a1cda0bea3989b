import { DomainError, type Decider, type DomainEvent } from './decider.ts';
import { distributionProblems, type DistributionEntry } from './distribution-entry.ts';
import { localisedDetailsProblem, type LocalisedDetails } from './localised-details.ts';

/** A game's kind (`spin-the-wheel`, `scratch-card`, ...): a lowercase slug; the contract lists no values. */
export const GAME_TYPE_PATTERN = /^[a-z0-9]+(-[a-z0-9]+)*$/;

export interface GameDefinition {
  name: string;
  type: string;
  communityId: string | null;
  details: LocalisedDetails;
}

/** A prize of a game: a distribution entry with its own id. */
export interface GameDistribution extends DistributionEntry {
  id: string;
}

export interface GameRecord extends GameDefinition {
  gameId: string;
  organisationId: string;
  distributions: GameDistribution[];
  createdAt: string;
  createdBy: string;
  updatedAt: string;
  updatedBy: string;
}

export type GameEvent =
  | DomainEvent<'GameCreated', GameDefinition & { gameId: string; organisationId: string; createdBy: string; createdAt: string }>
  | DomainEvent<
      'GameDistributionsAssigned',
      { gameId: string; organisationId: string; distributions: GameDistribution[]; assignedBy: string; assignedAt: string }
    >;

interface Stamp {
  gameId: string;
  organisationId: string;
  actor: string;
  now: string;
}

export type GameCommand =
  { type: 'CreateGame'; data: GameDefinition & Stamp } | { type: 'AssignGameDistributions'; data: Stamp & { distributions: GameDistribution[] } };

export type GameState = { exists: false } | ({ exists: true } & GameRecord);

export const gameDecider: Decider<GameCommand, GameEvent, GameState> = {
  initialState: { exists: false },

  decide(command, state) {
    switch (command.type) {
      case 'CreateGame': {
        const { actor, now, ...definition } = command.data;
        if (state.exists) throw new DomainError('conflict', `Game ${definition.gameId} already exists`);
        if (definition.name.trim().length === 0) throw new DomainError('invalid', 'name: must not be empty');
        if (!GAME_TYPE_PATTERN.test(definition.type)) throw new DomainError('invalid', 'type: must be a lowercase slug such as spin-the-wheel');
        const details = localisedDetailsProblem(definition.details);
        if (details) throw new DomainError('invalid', `details: ${details}`);
        return [{ type: 'GameCreated', data: { ...definition, createdBy: actor, createdAt: now } }];
      }

      case 'AssignGameDistributions': {
        const { gameId, organisationId, distributions, actor, now } = command.data;
        if (!state.exists || state.organisationId !== organisationId) throw new DomainError('not_found', `Game ${gameId} not found`);
        if (distributions.length === 0) throw new DomainError('invalid', 'distributions: needs at least one distribution');
        const [problem] = distributionProblems(distributions);
        if (problem) throw new DomainError('invalid', `distributions: ${problem}`);
        return [{ type: 'GameDistributionsAssigned', data: { gameId, organisationId, distributions, assignedBy: actor, assignedAt: now } }];
      }
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'GameCreated': {
        const { createdBy, createdAt, ...definition } = event.data;
        return { exists: true, ...definition, distributions: [], createdBy, createdAt, updatedBy: createdBy, updatedAt: createdAt };
      }
      case 'GameDistributionsAssigned':
        if (!state.exists) return state;
        // A POST replaces the game's whole set of prizes.
        return { ...state, distributions: event.data.distributions, updatedBy: event.data.assignedBy, updatedAt: event.data.assignedAt };
    }
  },
};
