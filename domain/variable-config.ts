import { DomainError, type Decider, type DomainEvent } from './decider.ts';

/**
 * A variable config declares a per-user variable (its key and the type of its values); leaderboard
 * `variable-config` conditions refer to it by id, and users carry values for it.
 */
export const VARIABLE_TYPES = ['string', 'number', 'boolean'] as const;
export type VariableType = (typeof VARIABLE_TYPES)[number];
export type VariableValue = string | number | boolean;

/** A letter, then letters, digits, `_`, `-` or `.`; at most 64 characters. */
export const VARIABLE_KEY_PATTERN = /^[A-Za-z][A-Za-z0-9_.-]{0,63}$/;

export interface VariableConfig {
  id: string;
  organisationId: string;
  key: string;
  type: VariableType;
  description: string | null;
  createdAt: string;
  createdBy: string;
}

export type VariableConfigEvent = DomainEvent<
  'VariableConfigCreated',
  { variableConfigId: string; organisationId: string; key: string; type: VariableType; description: string | null; createdAt: string; createdBy: string }
>;

export type VariableConfigCommand =
  | {
      type: 'CreateVariableConfig';
      data: { variableConfigId: string; organisationId: string; key: string; type: VariableType; description: string | null; actor: string; now: string };
    }
  /** A value is about to be stored for this variable: it must exist in the organisation and have its type. */
  | { type: 'CheckVariableValue'; data: { variableConfigId: string; organisationId: string; value: VariableValue } };

export type VariableConfigState = { exists: false } | ({ exists: true } & VariableConfig);

export function valueFitsType(value: VariableValue, type: VariableType): boolean {
  if (type === 'number') return typeof value === 'number' && Number.isFinite(value);
  return typeof value === type;
}

export const variableConfigDecider: Decider<VariableConfigCommand, VariableConfigEvent, VariableConfigState> = {
  initialState: { exists: false },

  decide(command, state) {
    switch (command.type) {
      case 'CreateVariableConfig': {
        const { actor, now, ...definition } = command.data;
        if (state.exists) throw new DomainError('conflict', `Variable config ${definition.variableConfigId} already exists`);
        if (!VARIABLE_KEY_PATTERN.test(definition.key)) {
          throw new DomainError('invalid', 'A variable key is a letter, then letters, digits, "_", "-" or "."; at most 64 characters');
        }
        return [{ type: 'VariableConfigCreated', data: { ...definition, createdAt: now, createdBy: actor } }];
      }
      case 'CheckVariableValue': {
        const { variableConfigId, organisationId, value } = command.data;
        if (!state.exists || state.organisationId !== organisationId) throw new DomainError('invalid', `Variable config ${variableConfigId} does not exist`);
        if (!valueFitsType(value, state.type)) throw new DomainError('invalid', `The variable ${state.key} takes ${state.type} values`);
        return [];
      }
    }
  },

  evolve(_state, event) {
    const { variableConfigId, ...rest } = event.data;
    return { exists: true, id: variableConfigId, ...rest };
  },
};

/**
 * A key names one variable per organisation; its own stream, appended in the same transaction as the
 * config, makes the claim atomic. Keys compare case-insensitively ("Tier" and "tier" are one variable).
 */
export type VariableKeyEvent = DomainEvent<'VariableKeyClaimed', { organisationId: string; key: string; variableConfigId: string }>;
export type VariableKeyCommand = { type: 'ClaimVariableKey'; data: VariableKeyEvent['data'] };

export const variableKeyDecider: Decider<VariableKeyCommand, VariableKeyEvent, { claimedBy: string | null }> = {
  initialState: { claimedBy: null },
  decide(command, state) {
    if (state.claimedBy) throw new DomainError('conflict', `A variable config with the key ${command.data.key} already exists`);
    return [{ type: 'VariableKeyClaimed', data: command.data }];
  },
  evolve(_state, event) {
    return { claimedBy: event.data.variableConfigId };
  },
};
