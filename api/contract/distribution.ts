import { z } from 'zod';
import { hexId } from './common.ts';

/** The largest supply (and amount per hand-out) an allocation may have: the read models count units in 32-bit integers. */
export const MAX_ALLOCATION_UNITS = 1_000_000_000;

/**
 * The most points or XP one hand-out (an action, a challenge, a rank of a leaderboard, a game) may give, and the
 * largest price. Unbounded, 1e308 was accepted: two hand-outs overflowed to Infinity, an XP event was logged
 * with a null amount and the points ledger parked the event (double precision out of range). A billion a
 * hand-out leaves every sum a user can reach finite and exact enough.
 */
export const MAX_AWARD = 1_000_000_000;

/**
 * The distribution structures shared by games, actions and leaderboards. The contract leaves open which
 * request fields are required; here: amounts default to 0, an allocation needs its reward and a supply,
 * and gets an id when it has none. In responses an allocation also carries `distributed` and `isLive`.
 * A distribution replaces the one before it whole, so an unknown (mistyped) field is a 400: ignored, it
 * would reset what it meant to set to 0.
 */
export const allocationInput = z
  .strictObject({
    id: hexId.optional().describe('generated when absent'),
    rewardId: hexId,
    supply: z.number().int().min(0).max(MAX_ALLOCATION_UNITS).describe('how many can ever be distributed'),
    amountToDistribute: z.number().int().min(1).max(MAX_ALLOCATION_UNITS).default(1).describe('given per distribution'),
  })
  .meta({ id: 'AllocationInput' });

export const allocationOutput = z
  .object({
    id: hexId,
    rewardId: hexId,
    supply: z.number(),
    amountToDistribute: z.number(),
    distributed: z.number().describe('how many have been distributed so far'),
    isLive: z.boolean().describe('true while distributed < supply'),
  })
  .meta({ id: 'Allocation' });

export const distributionInput = z
  .strictObject({
    pointsToDistribute: z.number().min(0).max(MAX_AWARD).default(0),
    bonusXpToDistribute: z.number().min(0).max(MAX_AWARD).default(0),
    rewardsConfig: z
      .strictObject({
        amountToDistribute: z.number().int().min(0).max(MAX_ALLOCATION_UNITS).default(0),
        allocations: z.array(allocationInput).max(100).default([]),
      })
      .default({ amountToDistribute: 0, allocations: [] }),
  })
  .meta({ id: 'DistributionInput' });

export const distributionOutput = z
  .object({
    pointsToDistribute: z.number(),
    bonusXpToDistribute: z.number(),
    rewardsConfig: z.object({ amountToDistribute: z.number(), allocations: z.array(allocationOutput) }),
  })
  .meta({ id: 'Distribution' });
