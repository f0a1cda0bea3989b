import { describe, expect, it } from 'vitest';
import { rewardDecider, type Redeemable, type RewardCommand, type RewardEvent } from '../domain/reward.ts';
import { given } from './support/decider-spec.ts';

const now = '2026-03-01T12:00:00.000Z';
const ids = { rewardId: 'b'.repeat(24), organisationId: 'c'.repeat(24) };
const noImages = { primaryImageUrl: '', secondaryImageUrl: '' };
const block = { title: 'Trip to Lisbon', description: 'Two nights', light: noImages, dark: noImages };
const details = [{ language: 'en', ...block }];
const common = {
  communityId: 'a'.repeat(24),
  details,
  tags: ['travel'],
  campaigns: ['spring'],
  additionalCommunityIds: [],
  metadata: { sponsor: 'TAP' },
};
const redeemable: Redeemable = {
  additionalInformation: [],
  content: 'Show this at the desk',
  instructions: null,
  instructionsImageUrl: null,
  supportUrl: null,
  supportEmail: 'help@example.com',
  supportPhoneNumber: null,
  redeemByDate: '2026-12-31T00:00:00.000Z',
};
const entries = { ...common, kind: 'entries' as const, drawsAt: '2026-04-01T00:00:00.000Z', supply: 3 };
const asset = { ...common, kind: 'asset' as const, redeemable, codes: ['A1', 'B2', 'C3'], expiresAt: null };
const audit = { createdAt: now, createdBy: 'token-1' };

const create = (definition: typeof entries | typeof asset | Record<string, unknown>): RewardCommand =>
  ({ type: 'CreateReward', data: { ...definition, ...ids, actor: 'token-1', now } }) as RewardCommand;
const update = (changes: Record<string, unknown>, at = now, organisationId = ids.organisationId): RewardCommand => ({
  type: 'UpdateReward',
  data: { ...ids, organisationId, changes, actor: 'token-2', now: at },
});
const addAllocation = (supply: number, at = now, overrides: Record<string, unknown> = {}): RewardCommand => ({
  type: 'AddAllocation',
  data: { ...ids, allocationId: 'd'.repeat(24), supply, amountToDistribute: 1, now: at, ...overrides },
});

const entriesCreated: RewardEvent = { type: 'RewardCreated', data: { ...entries, ...ids, ...audit } };
const assetCreated: RewardEvent = { type: 'RewardCreated', data: { ...asset, ...ids, ...audit } };
const allocationAdded = (supply: number, firstCodeIndex: number | null): RewardEvent => ({
  type: 'RewardAllocationAdded',
  data: { ...ids, allocationId: 'e'.repeat(24), supply, amountToDistribute: 1, firstCodeIndex, addedAt: now },
});

describe('reward decider: CreateReward', () => {
  it('creates an entries reward (a giveaway)', () => {
    given(rewardDecider, []).when(create(entries)).then([entriesCreated]);
  });

  it('creates an asset reward with its codes', () => {
    given(rewardDecider, []).when(create(asset)).then([assetCreated]);
  });

  it('refuses to create one twice', () => {
    given(rewardDecider, [entriesCreated])
      .when(create(entries))
      .thenRefuses('conflict', /already exists/);
  });

  it('refuses details without a language', () => {
    given(rewardDecider, [])
      .when(create({ ...entries, details: [] }))
      .thenRefuses('invalid', /at least one language/);
  });

  it('refuses a draw that is not in the future', () => {
    given(rewardDecider, [])
      .when(create({ ...entries, drawsAt: now }))
      .thenRefuses('invalid', /drawsAt must be in the future/);
  });

  it('refuses a giveaway without winners', () => {
    given(rewardDecider, [])
      .when(create({ ...entries, supply: 0 }))
      .thenRefuses('invalid', /supply/);
  });

  it('refuses duplicate codes', () => {
    given(rewardDecider, [])
      .when(create({ ...asset, codes: ['A1', 'A1'] }))
      .thenRefuses('invalid', /codes must be unique/);
  });
});

describe('reward decider: UpdateReward', () => {
  it('refuses a reward that does not exist', () => {
    given(rewardDecider, [])
      .when(update({ tags: ['x'] }))
      .thenRefuses('not_found', /not found/);
  });

  it("refuses another organisation's reward as not found", () => {
    given(rewardDecider, [entriesCreated])
      .when(update({ tags: ['x'] }, now, 'f'.repeat(24)))
      .thenRefuses('not_found', /not found/);
  });

  it('refuses a change of nothing', () => {
    given(rewardDecider, [entriesCreated])
      .when(update({}))
      .thenRefuses('invalid', /nothing to change/);
  });

  it('records only the fields that differ', () => {
    const newDetails = [{ language: 'fr', ...block, title: 'Voyage à Lisbonne' }];
    given(rewardDecider, [entriesCreated])
      .when(update({ tags: ['travel'], details: newDetails, drawsAt: '2026-05-01T00:00:00.000Z' }))
      .then([
        {
          type: 'RewardUpdated',
          data: { ...ids, changes: { details: newDetails, drawsAt: '2026-05-01T00:00:00.000Z' }, updatedAt: now, updatedBy: 'token-2' },
        },
      ]);
  });

  it('decides nothing when nothing differs', () => {
    given(rewardDecider, [entriesCreated])
      .when(update({ tags: ['travel'], drawsAt: entries.drawsAt }))
      .then([]);
  });

  it('refuses details without a language', () => {
    given(rewardDecider, [entriesCreated])
      .when(update({ details: [] }))
      .thenRefuses('invalid', /at least one language/);
  });

  it('refuses drawsAt on an asset reward', () => {
    given(rewardDecider, [assetCreated])
      .when(update({ drawsAt: '2026-05-01T00:00:00.000Z' }))
      .thenRefuses('invalid', /drawsAt applies to entries rewards/);
  });

  it('refuses expiresAt on an entries reward', () => {
    given(rewardDecider, [entriesCreated])
      .when(update({ expiresAt: '2026-05-01T00:00:00.000Z' }))
      .thenRefuses('invalid', /expiresAt applies to asset rewards/);
  });

  it('refuses a new draw date once the draw is due or done', () => {
    given(rewardDecider, [entriesCreated])
      .when(update({ drawsAt: '2026-06-01T00:00:00.000Z' }, entries.drawsAt))
      .thenRefuses('conflict', /due or done/);
  });

  it('still changes the details and tags of a giveaway whose draw is done', () => {
    given(rewardDecider, [entriesCreated])
      .when(update({ tags: ['archive'] }, '2026-04-02T00:00:00.000Z'))
      .then([{ type: 'RewardUpdated', data: { ...ids, changes: { tags: ['archive'] }, updatedAt: '2026-04-02T00:00:00.000Z', updatedBy: 'token-2' } }]);
  });

  it('refuses moving the draw into the past', () => {
    given(rewardDecider, [entriesCreated])
      .when(update({ drawsAt: '2026-02-01T00:00:00.000Z' }))
      .thenRefuses('invalid', /drawsAt must be in the future/);
  });

  it("sets and removes an asset reward's expiry", () => {
    given(rewardDecider, [assetCreated])
      .when(update({ expiresAt: '2026-09-01T00:00:00.000Z' }))
      .then([{ type: 'RewardUpdated', data: { ...ids, changes: { expiresAt: '2026-09-01T00:00:00.000Z' }, updatedAt: now, updatedBy: 'token-2' } }]);
    const withExpiry: RewardEvent = { type: 'RewardCreated', data: { ...asset, expiresAt: '2026-09-01T00:00:00.000Z', ...ids, ...audit } };
    given(rewardDecider, [withExpiry])
      .when(update({ expiresAt: null }))
      .then([{ type: 'RewardUpdated', data: { ...ids, changes: { expiresAt: null }, updatedAt: now, updatedBy: 'token-2' } }]);
  });
});

describe('reward decider: AddAllocation', () => {
  it('refuses a reward that does not exist, or is another organisation’s', () => {
    given(rewardDecider, [])
      .when(addAllocation(1))
      .thenRefuses('not_found', /not found/);
    given(rewardDecider, [entriesCreated])
      .when(addAllocation(1, now, { organisationId: 'f'.repeat(24) }))
      .thenRefuses('not_found', /not found/);
  });

  it('adds any supply to a reward without codes, with no code slice', () => {
    const noCodes: RewardEvent = { type: 'RewardCreated', data: { ...asset, codes: null, ...ids, ...audit } };
    given(rewardDecider, [noCodes])
      .when(addAllocation(1_000_000, now, { amountToDistribute: 5 }))
      .then([
        {
          type: 'RewardAllocationAdded',
          data: { ...ids, allocationId: 'd'.repeat(24), supply: 1_000_000, amountToDistribute: 5, firstCodeIndex: null, addedAt: now },
        },
      ]);
  });

  it('gives each allocation of a reward with codes the next slice of codes', () => {
    given(rewardDecider, [assetCreated, allocationAdded(2, 0)])
      .when(addAllocation(1))
      .then([
        { type: 'RewardAllocationAdded', data: { ...ids, allocationId: 'd'.repeat(24), supply: 1, amountToDistribute: 1, firstCodeIndex: 2, addedAt: now } },
      ]);
  });

  it('refuses allocations supplying more assets than there are codes', () => {
    given(rewardDecider, [assetCreated, allocationAdded(2, 0)])
      .when(addAllocation(2))
      .thenRefuses('invalid', /exceeds the codes left for allocations: 1 of 3/);
  });

  it('takes a supply of 0 (an allocation that is never live)', () => {
    given(rewardDecider, [assetCreated, allocationAdded(3, 0)])
      .when(addAllocation(0))
      .then([
        { type: 'RewardAllocationAdded', data: { ...ids, allocationId: 'd'.repeat(24), supply: 0, amountToDistribute: 1, firstCodeIndex: 3, addedAt: now } },
      ]);
  });

  it('refuses a negative supply or an amount below 1', () => {
    given(rewardDecider, [entriesCreated])
      .when(addAllocation(-1))
      .thenRefuses('invalid', /supply/);
    given(rewardDecider, [entriesCreated])
      .when(addAllocation(1, now, { amountToDistribute: 0 }))
      .thenRefuses('invalid', /amountToDistribute/);
  });

  it('refuses entries for a giveaway whose draw is due or done', () => {
    given(rewardDecider, [entriesCreated])
      .when(addAllocation(10, entries.drawsAt))
      .thenRefuses('conflict', /due or done/);
  });
});

describe('reward decider: evolve', () => {
  it('keeps the count of codes, not the codes, and the total allocated supply', () => {
    const state = [assetCreated, allocationAdded(2, 0)].reduce(rewardDecider.evolve, rewardDecider.initialState);
    expect(state).toEqual({
      exists: true,
      allocatedSupply: 2,
      drawn: false,
      reward: {
        id: ids.rewardId,
        organisationId: ids.organisationId,
        ...common,
        details: { en: block },
        kind: 'asset',
        redeemable,
        codeCount: 3,
        expiresAt: null,
        createdAt: now,
        updatedAt: now,
        createdBy: 'token-1',
        updatedBy: 'token-1',
      },
    });
  });

  it('applies a change and who made it, when', () => {
    const updated: RewardEvent = {
      type: 'RewardUpdated',
      data: { ...ids, changes: { tags: ['x'] }, updatedAt: '2026-03-02T00:00:00.000Z', updatedBy: 'token-2' },
    };
    const state = [entriesCreated, updated].reduce(rewardDecider.evolve, rewardDecider.initialState);
    expect(state.exists && state.reward).toMatchObject({ tags: ['x'], updatedAt: '2026-03-02T00:00:00.000Z', updatedBy: 'token-2', createdAt: now });
  });
});
