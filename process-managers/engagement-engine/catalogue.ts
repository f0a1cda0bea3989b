import { challengeDecider, type ChallengeEvent, type ChallengeState } from '../../domain/challenge.ts';
import type { AllocationEvent } from '../../domain/allocation.ts';
import type { LeaderboardEvent } from '../../domain/leaderboard.ts';
import { fromLocalised } from '../../domain/localised-details.ts';
import { NO_REDEEMABLE, type RewardEvent } from '../../domain/reward.ts';
import type { Recorded } from '../process-manager.ts';
import { loadChallenge, registerAllocations, saveChallenge, type EngineDb, type RewardTerms } from './state.ts';

/**
 * What the engine learns from the admin side, one event at a time (these are rare next to custom events):
 * the challenges it engages custom events in, the rewards and allocations it hands out, the leaderboards
 * whose windows it pays out.
 */
export type CatalogueEvent =
  | ChallengeEvent
  | Extract<RewardEvent, { type: 'RewardCreated' | 'RewardUpdated' | 'RewardAllocationAdded' }>
  | AllocationEvent
  | Extract<LeaderboardEvent, { type: 'LeaderboardCreated' | 'LeaderboardUpdated' | 'LeaderboardRewardsAssigned' }>;

export const CATALOGUE_EVENTS = [
  'ChallengeCreated',
  'ChallengeUpdated',
  'ActionDistributionAssigned',
  'RewardCreated',
  'RewardUpdated',
  'RewardAllocationAdded',
  'AllocationCreated',
  'LeaderboardCreated',
  'LeaderboardUpdated',
  'LeaderboardRewardsAssigned',
] as const satisfies readonly CatalogueEvent['type'][];

export async function learn(db: EngineDb, event: Recorded<CatalogueEvent>): Promise<void> {
  switch (event.type) {
    case 'ChallengeCreated':
    case 'ChallengeUpdated':
    case 'ActionDistributionAssigned':
      return foldChallenge(db, event);
    case 'RewardCreated':
    case 'RewardUpdated':
      return foldReward(db, event);
    case 'RewardAllocationAdded': {
      const { allocationId, rewardId, supply, firstCodeIndex } = event.data;
      await db
        .insertInto('engine_allocations')
        .values({ id: allocationId, reward_id: rewardId, supply, first_code_index: firstCodeIndex })
        .onConflict((oc) => oc.column('id').doUpdateSet({ supply, first_code_index: firstCodeIndex }))
        .execute();
      return;
    }
    case 'AllocationCreated': {
      const { allocationId, rewardId, supply } = event.data;
      // The engine appends its hand-outs after the allocation's own first event.
      const revision = event.revision.toString();
      await db
        .insertInto('engine_allocations')
        .values({ id: allocationId, reward_id: rewardId, supply, revision })
        .onConflict((oc) => oc.column('id').doUpdateSet({ supply, revision }))
        .execute();
      return;
    }
    case 'LeaderboardCreated':
    case 'LeaderboardUpdated':
    case 'LeaderboardRewardsAssigned':
      return foldLeaderboard(db, event);
  }
}

async function foldChallenge(db: EngineDb, event: Recorded<ChallengeEvent>): Promise<void> {
  const record = await loadChallenge(db, event.data.challengeId);
  const current: ChallengeState = record ? { exists: true, ...record } : challengeDecider.initialState;
  const next = challengeDecider.evolve(current, event);
  if (!next.exists) return;
  const { exists: _exists, ...saved } = next;
  await saveChallenge(db, saved);
  await registerAllocations(
    db,
    saved.actions.flatMap((action) => (action.distribution ? [action.distribution] : [])),
  );
}

async function foldReward(db: EngineDb, event: Recorded<Extract<RewardEvent, { type: 'RewardCreated' | 'RewardUpdated' }>>): Promise<void> {
  if (event.type === 'RewardCreated') {
    const data = event.data;
    const terms: RewardTerms = {
      details: fromLocalised(data.details),
      tags: data.tags,
      campaigns: data.campaigns,
      additionalCommunityIds: data.additionalCommunityIds,
      metadata: data.metadata,
      redeemable: data.kind === 'asset' ? data.redeemable : NO_REDEEMABLE,
      codes: data.kind === 'asset' ? data.codes : null,
      expiresAt: data.kind === 'asset' ? data.expiresAt : null,
    };
    await db
      .insertInto('engine_rewards')
      .values({
        id: data.rewardId,
        organisation_id: data.organisationId,
        community_id: data.communityId,
        kind: data.kind,
        draws_at: data.kind === 'entries' ? data.drawsAt : null,
        terms: JSON.stringify(terms),
      })
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
    return;
  }
  const row = await db.selectFrom('engine_rewards').select(['terms', 'draws_at']).where('id', '=', event.data.rewardId).executeTakeFirst();
  if (!row) return;
  const { details, tags, drawsAt, expiresAt } = event.data.changes;
  const next: RewardTerms = {
    ...row.terms,
    ...(details !== undefined ? { details: fromLocalised(details) } : {}),
    ...(tags !== undefined ? { tags } : {}),
    ...(expiresAt !== undefined ? { expiresAt } : {}),
  };
  await db
    .updateTable('engine_rewards')
    .set({ terms: JSON.stringify(next), draws_at: drawsAt ?? row.draws_at })
    .where('id', '=', event.data.rewardId)
    .execute();
}

async function foldLeaderboard(
  db: EngineDb,
  event: Recorded<Extract<LeaderboardEvent, { type: 'LeaderboardCreated' | 'LeaderboardUpdated' | 'LeaderboardRewardsAssigned' }>>,
): Promise<void> {
  const { leaderboardId } = event.data;
  const communityOf = (conditions: { type: string; communityId?: string }[]) => conditions.find((c) => c.type === 'community')?.communityId ?? null;
  if (event.type === 'LeaderboardCreated') {
    await db
      .insertInto('engine_leaderboards')
      .values({ id: leaderboardId, community_id: communityOf(event.data.conditions), rewards: JSON.stringify([]) })
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
  } else if (event.type === 'LeaderboardUpdated' && event.data.changes.conditions !== undefined) {
    await db
      .updateTable('engine_leaderboards')
      .set({ community_id: communityOf(event.data.changes.conditions) })
      .where('id', '=', leaderboardId)
      .execute();
  } else if (event.type === 'LeaderboardRewardsAssigned') {
    await db
      .updateTable('engine_leaderboards')
      .set({ rewards: JSON.stringify(event.data.rewards) })
      .where('id', '=', leaderboardId)
      .execute();
    await registerAllocations(db, event.data.rewards);
  }
}
