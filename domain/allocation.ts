import { DomainError, type Decider, type DomainEvent } from './decider.ts';

/**
 * A reward allocation: a supply of a reward's units (entries for a giveaway, assets otherwise) that
 * distributions hand out `amountToDistribute` at a time.
 *
 * Each allocation is its own stream, `allocation-<id>`, so that its supply is one consistency boundary.
 * The distribution engine will decide a hand-out on this stream's state (supply, distributed) and append
 * its `AllocationDistributed` event at the revision it read, in the same multi-stream append as the
 * user's ledger event on `user-<id>` (`handleCommand` with two parts). Two concurrent hand-outs from one
 * allocation cannot both append at the same revision: the loser's whole append (ledger event included)
 * fails, is re-decided on fresh state, and is refused once distributed + amount would pass the supply.
 * So `distributed` never exceeds `supply`, whatever the concurrency, and contention stays per allocation
 * (never on the reward or the user's other allocations). For a reward with codes, the n-th unit handed
 * out takes codes[firstCodeIndex + n] (see `RewardAllocationAdded`): the slice is fixed when the
 * allocation is added, so no code goes out twice without touching the reward's stream.
 *
 * The allocation is opened in the same atomic append as `RewardAllocationAdded` on `reward-<id>`, whose
 * revision guards the reward-wide rule (total supply within the number of codes).
 */
export type AllocationEvent = DomainEvent<
  'AllocationCreated',
  {
    allocationId: string;
    rewardId: string;
    organisationId: string;
    supply: number;
    amountToDistribute: number;
    createdAt: string;
    createdBy: string;
  }
>;

export type AllocationCommand = {
  type: 'CreateAllocation';
  data: {
    allocationId: string;
    rewardId: string;
    organisationId: string;
    supply: number;
    amountToDistribute: number;
    actor: string;
    now: string;
  };
};

export type AllocationState =
  | { exists: false }
  | { exists: true; allocationId: string; rewardId: string; organisationId: string; supply: number; amountToDistribute: number; distributed: number };

export const allocationDecider: Decider<AllocationCommand, AllocationEvent, AllocationState> = {
  initialState: { exists: false },

  decide(command, state) {
    switch (command.type) {
      case 'CreateAllocation': {
        const { actor, now, ...allocation } = command.data;
        if (state.exists) throw new DomainError('conflict', `Allocation ${allocation.allocationId} already exists`);
        if (!Number.isInteger(allocation.supply) || allocation.supply < 0) throw new DomainError('invalid', 'supply must be a whole number, at least 0');
        if (!Number.isInteger(allocation.amountToDistribute) || allocation.amountToDistribute < 1) {
          throw new DomainError('invalid', 'amountToDistribute must be a whole number, at least 1');
        }
        return [{ type: 'AllocationCreated', data: { ...allocation, createdAt: now, createdBy: actor } }];
      }
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'AllocationCreated': {
        const { allocationId, rewardId, organisationId, supply, amountToDistribute } = event.data;
        return { exists: true, allocationId, rewardId, organisationId, supply, amountToDistribute, distributed: 0 };
      }
      // The engine's hand-outs (`AllocationDistributed`) share the stream; the command side decides on none of them.
      default:
        return state;
    }
  },
};

/** The allocation as the admin API returns it (the contract's allocation with `distributed` and `isLive`). */
export interface RewardAllocation {
  id: string;
  rewardId: string;
  supply: number;
  amountToDistribute: number;
  distributed: number;
  isLive: boolean;
}

export function isLive(allocation: { supply: number; distributed: number }): boolean {
  return allocation.distributed < allocation.supply;
}
