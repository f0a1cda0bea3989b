import { describe, expect, it } from 'vitest';
import type { DistributionEntry } from '../domain/distribution-entry.ts';
import { gameDecider, type GameCommand, type GameDistribution, type GameEvent } from '../domain/game.ts';
import { pickDetails, type LocalisedDetails } from '../domain/localised-details.ts';
import { given } from './support/decider-spec.ts';

const none = { primaryImageUrl: '', secondaryImageUrl: '' };
const details: LocalisedDetails = [{ language: 'en', title: 'Spin', description: '', light: none, dark: none }];
const ids = { gameId: 'a'.repeat(24), organisationId: 'b'.repeat(24) };
const definition = { name: 'Spin to win', type: 'spin-the-wheel', communityId: null, details };
const now = '2026-01-01T00:00:00.000Z';
const create = (overrides: Partial<typeof definition> = {}): GameCommand => ({
  type: 'CreateGame',
  data: { ...definition, ...ids, actor: 'token-1', now, ...overrides },
});
const created: GameEvent = { type: 'GameCreated', data: { ...definition, ...ids, createdBy: 'token-1', createdAt: now } };
const entry = (id: string, allocationId: string, overrides: Partial<DistributionEntry> = {}): GameDistribution => ({
  id,
  pointsToDistribute: 1,
  bonusXpToDistribute: 0,
  rewardsConfig: { amountToDistribute: 1, allocations: [{ id: allocationId, rewardId: 'c'.repeat(24), supply: 3, amountToDistribute: 1 }] },
  ...overrides,
});
const assign = (distributions: GameDistribution[], organisationId = ids.organisationId): GameCommand => ({
  type: 'AssignGameDistributions',
  data: { ...ids, organisationId, distributions, actor: 'token-2', now },
});

describe('game decider', () => {
  it('creates a game config that does not exist yet', () => {
    given(gameDecider, []).when(create()).then([created]);
  });

  it('refuses to create one twice', () => {
    given(gameDecider, [created])
      .when(create())
      .thenRefuses('conflict', /already exists/);
  });

  it('refuses a blank name, a type that is not a slug, details without a language', () => {
    given(gameDecider, [])
      .when(create({ name: '  ' }))
      .thenRefuses('invalid', /name/);
    given(gameDecider, [])
      .when(create({ type: 'Spin Wheel' }))
      .thenRefuses('invalid', /type/);
    given(gameDecider, [])
      .when(create({ details: [] }))
      .thenRefuses('invalid', /details/);
  });

  it('assigns the prizes', () => {
    const distributions = [entry('1'.repeat(24), '2'.repeat(24)), entry('3'.repeat(24), '4'.repeat(24))];
    given(gameDecider, [created])
      .when(assign(distributions))
      .then([{ type: 'GameDistributionsAssigned', data: { ...ids, distributions, assignedBy: 'token-2', assignedAt: now } }]);
  });

  it('an unknown game, or another organisation’s, is not found', () => {
    given(gameDecider, [])
      .when(assign([entry('1'.repeat(24), '2'.repeat(24))]))
      .thenRefuses('not_found', /not found/);
    given(gameDecider, [created])
      .when(assign([entry('1'.repeat(24), '2'.repeat(24))], 'f'.repeat(24)))
      .thenRefuses('not_found', /not found/);
  });

  it('refuses no prizes, negative amounts, one allocation in two prizes', () => {
    given(gameDecider, [created])
      .when(assign([]))
      .thenRefuses('invalid', /at least one/);
    given(gameDecider, [created])
      .when(assign([entry('1'.repeat(24), '2'.repeat(24), { pointsToDistribute: -1 })]))
      .thenRefuses('invalid', /pointsToDistribute must be >= 0/);
    given(gameDecider, [created])
      .when(assign([entry('1'.repeat(24), '2'.repeat(24)), entry('3'.repeat(24), '2'.repeat(24))]))
      .thenRefuses('invalid', /given twice/);
  });

  it('a new assignment replaces the previous prizes', () => {
    const first = [entry('1'.repeat(24), '2'.repeat(24))];
    const second = [entry('3'.repeat(24), '4'.repeat(24))];
    const events: GameEvent[] = [
      created,
      { type: 'GameDistributionsAssigned', data: { ...ids, distributions: first, assignedBy: 'token-2', assignedAt: now } },
      { type: 'GameDistributionsAssigned', data: { ...ids, distributions: second, assignedBy: 'token-3', assignedAt: '2026-01-02T00:00:00.000Z' } },
    ];
    const state = events.reduce(gameDecider.evolve, gameDecider.initialState);
    expect(state).toMatchObject({ exists: true, distributions: second, updatedBy: 'token-3', createdBy: 'token-1' });
  });
});

describe('picking a language', () => {
  const localised: LocalisedDetails = ['fr', 'en', 'pt-BR'].map((language) => ({ language, title: language, description: '', light: none, dark: none }));
  it('takes the wanted language, case-insensitively', () => {
    expect(pickDetails(localised, 'PT-br', 'en').title).toBe('pt-BR');
  });
  it('falls back to the primary subtag of the wanted one', () => {
    expect(pickDetails(localised, 'fr-CA', 'en').title).toBe('fr');
  });
  it('then to the organisation default', () => {
    expect(pickDetails(localised, 'de', 'en').title).toBe('en');
    expect(pickDetails(localised, undefined, 'en').title).toBe('en');
  });
  it('then to the first language given', () => {
    expect(pickDetails(localised, 'de', 'nl').title).toBe('fr');
  });
});
