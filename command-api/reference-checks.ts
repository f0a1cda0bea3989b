import { allocationDecider, type AllocationState } from '../domain/allocation.ts';
import { communityDecider, type CommunityState } from '../domain/community.ts';
import { DomainError, type Decider } from '../domain/decider.ts';
import { rewardDecider, type RewardState } from '../domain/reward.ts';
import { variableConfigDecider, type VariableConfigState } from '../domain/variable-config.ts';
import type { CommandPart } from './command-handling.ts';

/**
 * Parts that append nothing and refuse (400) an id of another organisation's resource, named by a command
 * that stores it as a reference: a community, a reward, a variable config, an allocation added to a reward.
 * Each decides on the named resource's own stream in the same decision (a state the process has cached
 * once the resource exists, its owner being final; otherwise read), so a resource created a moment ago
 * counts. Another organisation's is refused as unknown; an id that names nothing yet is accepted, as it
 * was before these checks (only users and custom events require their communities to exist).
 */
function notAnotherOrganisations<State>(
  kind: string,
  stream: (id: string) => string,
  decider: Decider<any, any, State>,
  ownerOf: (state: State) => string | null,
) {
  return (organisationId: string, ids: readonly string[]): CommandPart[] =>
    [...new Set(ids)].map((id) => ({
      stream: stream(id),
      decider: {
        ...decider,
        decide(_command: unknown, state: State) {
          const owner = ownerOf(state);
          if (owner !== null && owner !== organisationId) throw new DomainError('invalid', `${kind} ${id} does not exist`);
          return [];
        },
      },
      command: { type: 'RefuseAnotherOrganisations' },
      // A resource's owner never changes: once it exists, the verdict is final.
      lasting: (state: State) => ownerOf(state) !== null,
    }));
}

/** Every community named must exist in the organisation (users, custom events). */
export function communityChecks(organisationId: string, communityIds: readonly string[]): CommandPart[] {
  return [...new Set(communityIds)].map((communityId) => ({
    stream: `community-${communityId}`,
    decider: communityDecider,
    command: { type: 'RequireCommunity', data: { communityId, organisationId } },
    // Communities are never removed and never change organisation: one that exists passes for good.
    lasting: (state: CommunityState) => state.exists,
  }));
}

export const foreignCommunityChecks = notAnotherOrganisations(
  'Community',
  (id) => `community-${id}`,
  communityDecider,
  (state: CommunityState) => (state.exists ? state.organisationId : null),
);
const foreignRewardChecks = notAnotherOrganisations(
  'Reward',
  (id) => `reward-${id}`,
  rewardDecider,
  (state: RewardState) => (state.exists ? state.reward.organisationId : null),
);
export const foreignVariableConfigChecks = notAnotherOrganisations(
  'Variable config',
  (id) => `variableconfig-${id}`,
  variableConfigDecider,
  (state: VariableConfigState) => (state.exists ? state.organisationId : null),
);
const foreignAllocationChecks = notAnotherOrganisations(
  'Allocation',
  (id) => `allocation-${id}`,
  allocationDecider,
  (state: AllocationState) => (state.exists ? state.organisationId : null),
);

/** What a distribution names: each allocation's reward and, when given, its id. */
export function distributionChecks(
  organisationId: string,
  allocations: readonly { id?: string | undefined; allocationId?: string | undefined; rewardId: string }[],
): CommandPart[] {
  const allocationIds = allocations.map((allocation) => allocation.id ?? allocation.allocationId).filter((id) => id !== undefined);
  return [
    ...foreignRewardChecks(
      organisationId,
      allocations.map((allocation) => allocation.rewardId),
    ),
    ...foreignAllocationChecks(organisationId, allocationIds),
  ];
}

/** The variable configs that a leaderboard's conditions name. */
export function conditionVariables(conditions: readonly { type: string; variableConfigId?: string }[] | undefined): string[] {
  return (conditions ?? []).flatMap((condition) => (condition.type === 'variable-config' && condition.variableConfigId ? [condition.variableConfigId] : []));
}

/** The allocations of distribution entries (games, actions, leaderboard ranks). */
export function allocationsOf(entries: readonly ({ rewardsConfig: { allocations: { id?: string; rewardId: string }[] } } | null | undefined)[]) {
  return entries.flatMap((entry) => entry?.rewardsConfig.allocations ?? []);
}
