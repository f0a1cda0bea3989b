import { describe, expect, it } from 'vitest';
import {
  valueFitsType,
  variableConfigDecider,
  variableKeyDecider,
  type VariableConfigCommand,
  type VariableConfigEvent,
  type VariableKeyEvent,
} from '../domain/variable-config.ts';
import { given } from './support/decider-spec.ts';

const ids = { variableConfigId: 'a'.repeat(24), organisationId: 'b'.repeat(24) };
const create = (key = 'tier'): VariableConfigCommand => ({
  type: 'CreateVariableConfig',
  data: { ...ids, key, type: 'string', description: 'Loyalty tier', actor: 'token-1', now: '2026-01-01T10:00:00.000Z' },
});
const created: VariableConfigEvent = {
  type: 'VariableConfigCreated',
  data: { ...ids, key: 'tier', type: 'string', description: 'Loyalty tier', createdAt: '2026-01-01T10:00:00.000Z', createdBy: 'token-1' },
};
const check = (value: string | number | boolean, organisationId = ids.organisationId): VariableConfigCommand => ({
  type: 'CheckVariableValue',
  data: { variableConfigId: ids.variableConfigId, organisationId, value },
});

describe('variable config decider', () => {
  it('creates a variable config', () => {
    given(variableConfigDecider, []).when(create()).then([created]);
  });

  it('refuses to create one twice', () => {
    given(variableConfigDecider, [created])
      .when(create())
      .thenRefuses('conflict', /already exists/);
  });

  it('refuses a key that is not a letter followed by letters, digits, _ - .', () => {
    given(variableConfigDecider, [])
      .when(create('1tier'))
      .thenRefuses('invalid', /variable key/);
    given(variableConfigDecider, [])
      .when(create('t'.repeat(65)))
      .thenRefuses('invalid', /variable key/);
  });

  it('accepts a value of its type', () => {
    given(variableConfigDecider, [created]).when(check('gold')).then([]);
  });

  it('refuses a value of another type', () => {
    given(variableConfigDecider, [created])
      .when(check(3))
      .thenRefuses('invalid', /takes string values/);
  });

  it('refuses values for a variable that does not exist, or is another organisation’s', () => {
    given(variableConfigDecider, [])
      .when(check('gold'))
      .thenRefuses('invalid', /does not exist/);
    given(variableConfigDecider, [created])
      .when(check('gold', 'c'.repeat(24)))
      .thenRefuses('invalid', /does not exist/);
  });
});

describe('variable key claims', () => {
  const claim = { type: 'ClaimVariableKey' as const, data: { organisationId: ids.organisationId, key: 'tier', variableConfigId: ids.variableConfigId } };
  const claimed: VariableKeyEvent = { type: 'VariableKeyClaimed', data: claim.data };

  it('claims a free key', () => {
    given(variableKeyDecider, []).when(claim).then([claimed]);
  });

  it('refuses a key already claimed', () => {
    given(variableKeyDecider, [claimed])
      .when({ ...claim, data: { ...claim.data, variableConfigId: 'd'.repeat(24) } })
      .thenRefuses('conflict', /already exists/);
  });
});

describe('value types', () => {
  it('matches strings, finite numbers and booleans to their types', () => {
    expect(valueFitsType('x', 'string')).toBe(true);
    expect(valueFitsType(1.5, 'number')).toBe(true);
    expect(valueFitsType(Number.NaN, 'number')).toBe(false);
    expect(valueFitsType(false, 'boolean')).toBe(true);
    expect(valueFitsType('true', 'boolean')).toBe(false);
    expect(valueFitsType(1, 'string')).toBe(false);
  });
});
