import { allocationDecider } from '../domain/allocation.ts';
import { communityDecider } from '../domain/community.ts';
import { rewardDecider } from '../domain/reward.ts';
import { variableConfigDecider } from '../domain/variable-config.ts';
import type { CommandPart } from './command-handling.ts';

/**
 * Parts that append nothing and refuse (400) an id the organisation does not own, named by a command that
 * stores it: a community, a reward, an allocation. Each reads the named resource's own stream in the same
 * decision, so a resource created a moment ago counts, and another organisation's is as unknown as a
 * missing one (its id never becomes a reference in this organisation's records).
 */
export function communityChecks(organisationId: string, communityIds: readonly string[]): CommandPart[] {
  return [...new Set(communityIds)].map((communityId) => ({
    stream: `community-${communityId}`,
    decider: communityDecider,
    command: { type: 'RequireCommunity', data: { communityId, organisationId } },
  }));
}

export function rewardChecks(organisationId: string, rewardIds: readonly string[]): CommandPart[] {
  return [...new Set(rewardIds)].map((rewardId) => ({
    stream: `reward-${rewardId}`,
    decider: rewardDecider,
    command: { type: 'RequireReward', data: { rewardId, organisationId } },
  }));
}

/** What a distribution names: each allocation's reward (the organisation's) and id (new, or the organisation's). */
export function distributionChecks(
  organisationId: string,
  allocations: readonly { id?: string | undefined; allocationId?: string | undefined; rewardId: string }[],
): CommandPart[] {
  const allocationIds = new Set(allocations.map((allocation) => allocation.id ?? allocation.allocationId).filter((id) => id !== undefined));
  return [
    ...rewardChecks(
      organisationId,
      allocations.map((allocation) => allocation.rewardId),
    ),
    ...[...allocationIds].map((allocationId) => ({
      stream: `allocation-${allocationId}`,
      decider: allocationDecider,
      command: { type: 'RequireAllocationIdFree', data: { allocationId, organisationId } },
    })),
  ];
}

export function variableConfigChecks(organisationId: string, variableConfigIds: readonly string[]): CommandPart[] {
  return [...new Set(variableConfigIds)].map((variableConfigId) => ({
    stream: `variableconfig-${variableConfigId}`,
    decider: variableConfigDecider,
    command: { type: 'RequireVariableConfig', data: { variableConfigId, organisationId } },
  }));
}

/** Conditions on a user's variables: each variable the organisation's, each value of its type. */
export function variableChecks(organisationId: string, conditions: readonly { type: string; variableConfigId?: string; value?: unknown }[]): CommandPart[] {
  return conditions.flatMap((condition) =>
    condition.type === 'variable-config' && condition.variableConfigId
      ? [
          {
            stream: `variableconfig-${condition.variableConfigId}`,
            decider: variableConfigDecider,
            command: { type: 'CheckVariableValue', data: { variableConfigId: condition.variableConfigId, organisationId, value: condition.value } },
          },
        ]
      : [],
  );
}

/** The allocations of distribution entries (games, actions, leaderboard ranks). */
export function allocationsOf(entries: readonly ({ rewardsConfig: { allocations: { id?: string; rewardId: string }[] } } | null | undefined)[]) {
  return entries.flatMap((entry) => entry?.rewardsConfig.allocations ?? []);
}
