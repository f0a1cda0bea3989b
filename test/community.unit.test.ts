import { describe, expect, it } from 'vitest';
import { communityDecider, mergeDetails, type CommunityCommand, type CommunityEvent, type DetailsBlock } from '../domain/community.ts';
import { given } from './support/decider-spec.ts';

const block = (title: string): DetailsBlock => ({
  title,
  description: '',
  light: { primaryImageUrl: '', secondaryImageUrl: '' },
  dark: { primaryImageUrl: 'https://img.example/dark.png', secondaryImageUrl: '' },
});
const ids = { communityId: 'a'.repeat(24), organisationId: 'b'.repeat(24) };
const otherOrganisation = 'c'.repeat(24);
const create = (overrides: Partial<Extract<CommunityCommand, { type: 'CreateCommunity' }>['data']> = {}): CommunityCommand => ({
  type: 'CreateCommunity',
  data: {
    ...ids,
    name: 'Runners',
    description: null,
    details: { nl: block('Lopers'), en: block('Runners') },
    actor: 'token-1',
    now: '2026-01-01T10:00:00.000Z',
    ...overrides,
  },
});
const created: CommunityEvent = {
  type: 'CommunityCreated',
  data: {
    ...ids,
    name: 'Runners',
    description: null,
    details: { en: block('Runners'), nl: block('Lopers') },
    createdAt: '2026-01-01T10:00:00.000Z',
    createdBy: 'token-1',
  },
};
const update = (changes: Extract<CommunityCommand, { type: 'UpdateCommunity' }>['data']['changes'], organisationId = ids.organisationId): CommunityCommand => ({
  type: 'UpdateCommunity',
  data: { communityId: ids.communityId, organisationId, changes, actor: 'token-2', now: '2026-01-02T10:00:00.000Z' },
});

describe('community decider', () => {
  it('creates a community, its languages in a stable order', () => {
    given(communityDecider, []).when(create()).then([created]);
  });

  it('refuses to create one twice', () => {
    given(communityDecider, [created])
      .when(create())
      .thenRefuses('conflict', /already exists/);
  });

  it('refuses a blank name', () => {
    given(communityDecider, [])
      .when(create({ name: '   ' }))
      .thenRefuses('invalid', /needs a name/);
  });

  it('updates only what changes: a language replaced, one removed, one added', () => {
    given(communityDecider, [created])
      .when(update({ name: 'Runners', description: 'Weekly runs', details: { nl: null, en: block('Runners!'), fr: block('Coureurs') } }))
      .then([
        {
          type: 'CommunityUpdated',
          data: {
            ...ids,
            changes: { description: 'Weekly runs', details: { en: block('Runners!'), fr: block('Coureurs') } },
            updatedAt: '2026-01-02T10:00:00.000Z',
            updatedBy: 'token-2',
          },
        },
      ]);
  });

  it('decides nothing when nothing changes', () => {
    given(communityDecider, [created])
      .when(update({ name: 'Runners', description: null, details: { en: block('Runners') } }))
      .then([]);
  });

  it('refuses a blank new name', () => {
    given(communityDecider, [created])
      .when(update({ name: ' ' }))
      .thenRefuses('invalid', /needs a name/);
  });

  it('does not find a community that does not exist, or another organisation’s', () => {
    given(communityDecider, [])
      .when(update({ name: 'X' }))
      .thenRefuses('not_found', /not found/);
    given(communityDecider, [created])
      .when(update({ name: 'X' }, otherOrganisation))
      .thenRefuses('not_found', /not found/);
  });

  it('lets another aggregate require it: fine in its organisation, invalid elsewhere or when missing', () => {
    const require = (organisationId: string): CommunityCommand => ({ type: 'RequireCommunity', data: { communityId: ids.communityId, organisationId } });
    given(communityDecider, [created]).when(require(ids.organisationId)).then([]);
    given(communityDecider, [created])
      .when(require(otherOrganisation))
      .thenRefuses('invalid', /does not exist/);
    given(communityDecider, [])
      .when(require(ids.organisationId))
      .thenRefuses('invalid', /does not exist/);
  });

  it('evolves into the community with its update stamps', () => {
    const updated: CommunityEvent = {
      type: 'CommunityUpdated',
      data: { ...ids, changes: { name: 'Joggers' }, updatedAt: '2026-01-02T10:00:00.000Z', updatedBy: 'token-2' },
    };
    const state = [created, updated].reduce(communityDecider.evolve, communityDecider.initialState);
    expect(state).toEqual({
      exists: true,
      id: ids.communityId,
      organisationId: ids.organisationId,
      name: 'Joggers',
      description: null,
      details: created.data.details,
      createdAt: '2026-01-01T10:00:00.000Z',
      createdBy: 'token-1',
      updatedAt: '2026-01-02T10:00:00.000Z',
      updatedBy: 'token-2',
    });
  });
});

describe('merging localised details', () => {
  it('replaces and removes per language and sorts the languages', () => {
    expect(Object.keys(mergeDetails({ nl: block('a'), en: block('b') }, { de: block('c'), nl: null }))).toEqual(['de', 'en']);
  });
});
