/**
 * The distribution entry shared by games and actions (contract "Distribution structures"): points, bonus
 * XP and reward allocations handed out when the owner pays out. Allocation ids are assigned before a
 * command reaches a decider, so the events always carry them.
 */
export interface Allocation {
  id: string;
  rewardId: string;
  supply: number;
  amountToDistribute: number;
}

export interface DistributionEntry {
  pointsToDistribute: number;
  bonusXpToDistribute: number;
  rewardsConfig: { amountToDistribute: number; allocations: Allocation[] };
}

/** An allocation as responses show it: how much of its supply has gone, and whether any is left. */
export interface AllocationView extends Allocation {
  distributed: number;
  isLive: boolean;
}

export interface DistributionView extends Omit<DistributionEntry, 'rewardsConfig'> {
  rewardsConfig: { amountToDistribute: number; allocations: AllocationView[] };
}

/**
 * Nothing is handed out by assigning a distribution; an allocation is live while it has supply left.
 * Distribution itself (and so `distributed` > 0) is the completion engine's, which writes its own events.
 */
export function freshDistributionView(entry: DistributionEntry): DistributionView {
  return {
    pointsToDistribute: entry.pointsToDistribute,
    bonusXpToDistribute: entry.bonusXpToDistribute,
    rewardsConfig: {
      amountToDistribute: entry.rewardsConfig.amountToDistribute,
      allocations: entry.rewardsConfig.allocations.map((allocation) => ({ ...allocation, distributed: 0, isLive: allocation.supply > 0 })),
    },
  };
}

/** The contract's limits (amounts >= 0) and one allocation id per allocation across the given entries. */
export function distributionProblems(entries: DistributionEntry[]): string[] {
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const entry of entries) {
    if (!(entry.pointsToDistribute >= 0)) problems.push('pointsToDistribute must be >= 0');
    if (!(entry.bonusXpToDistribute >= 0)) problems.push('bonusXpToDistribute must be >= 0');
    for (const allocation of entry.rewardsConfig.allocations) {
      if (seen.has(allocation.id)) problems.push(`allocation ${allocation.id} is given twice`);
      if (!(allocation.supply >= 0)) problems.push(`allocation ${allocation.id}: supply must be >= 0`);
      seen.add(allocation.id);
    }
  }
  return problems;
}
