import { describe, expect, it } from 'vitest';
import { allocationDecider, isLive, type AllocationCommand, type AllocationEvent } from '../domain/allocation.ts';
import { given } from './support/decider-spec.ts';

const now = '2026-03-01T12:00:00.000Z';
const allocation = { allocationId: 'd'.repeat(24), rewardId: 'b'.repeat(24), organisationId: 'c'.repeat(24), supply: 10, amountToDistribute: 2 };
const create = (overrides: Partial<AllocationCommand['data']> = {}): AllocationCommand => ({
  type: 'CreateAllocation',
  data: { ...allocation, actor: 'token-1', now, ...overrides },
});
const created: AllocationEvent = { type: 'AllocationCreated', data: { ...allocation, createdAt: now, createdBy: 'token-1' } };

describe('allocation decider', () => {
  it('opens an allocation with its supply', () => {
    given(allocationDecider, []).when(create()).then([created]);
  });

  it('refuses to open one twice', () => {
    given(allocationDecider, [created])
      .when(create())
      .thenRefuses('conflict', /already exists/);
  });

  it('refuses a negative or fractional supply', () => {
    given(allocationDecider, [])
      .when(create({ supply: -1 }))
      .thenRefuses('invalid', /supply/);
    given(allocationDecider, [])
      .when(create({ supply: 1.5 }))
      .thenRefuses('invalid', /supply/);
  });

  it('refuses an amount to distribute below 1', () => {
    given(allocationDecider, [])
      .when(create({ amountToDistribute: 0 }))
      .thenRefuses('invalid', /amountToDistribute/);
  });

  it('evolves into an allocation with nothing distributed yet', () => {
    expect(allocationDecider.evolve(allocationDecider.initialState, created)).toEqual({ exists: true, ...allocation, distributed: 0 });
  });
});

describe('isLive', () => {
  it('is true while less than the supply has been distributed', () => {
    expect(isLive({ supply: 2, distributed: 1 })).toBe(true);
    expect(isLive({ supply: 2, distributed: 2 })).toBe(false);
    expect(isLive({ supply: 0, distributed: 0 })).toBe(false);
  });
});
