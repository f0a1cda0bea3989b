import type { z } from 'zod';
import { newId } from '../../infra/ids.ts';
import { distributionInput } from './distribution.ts';

/**
 * A distribution entry as a command receives it: every allocation with an id (lowercased when given,
 * generated when absent), so the events name each allocation and later payouts can count against it.
 */
export const distributionWithIds = distributionInput.transform((entry) => ({
  ...entry,
  rewardsConfig: {
    ...entry.rewardsConfig,
    allocations: entry.rewardsConfig.allocations.map((allocation) => ({ ...allocation, id: allocation.id?.toLowerCase() ?? newId() })),
  },
}));

/** One id per allocation across the entries of a request, with the path of each repeat. */
export function refineUniqueAllocationIds(
  entries: { rewardsConfig: { allocations: { id: string }[] } }[],
  ctx: z.RefinementCtx,
  pathOf: (entry: number, allocation: number) => (string | number)[],
): void {
  const seen = new Set<string>();
  entries.forEach((entry, i) =>
    entry.rewardsConfig.allocations.forEach((allocation, j) => {
      if (seen.has(allocation.id)) ctx.addIssue({ code: 'custom', path: pathOf(i, j), message: 'this allocation id is given twice' });
      seen.add(allocation.id);
    }),
  );
}
