import type { GiveawayDrawnEvent, RewardAssetGrant } from '../../domain/engagement-events.ts';
import type { BatchContext, Recorded } from '../process-manager.ts';
import { OutcomeAppends, assetTerms } from './appends.ts';
import { loadRewardTerms, type EngineDb } from './state.ts';

/** Each giveaway winner gets one asset of the reward (its id was drawn with the winners), granted once. */
export async function grantGiveawayAssets(db: EngineDb, cause: Recorded<GiveawayDrawnEvent>, context: BatchContext): Promise<void> {
  const drawn = cause.data;
  const terms = await loadRewardTerms(db, drawn.rewardId);
  if (!terms) return;
  const grants: RewardAssetGrant[] = drawn.winners.map((winner) => ({
    organisationId: drawn.organisationId,
    communityId: drawn.communityId,
    userId: winner.userId,
    occurredAt: drawn.drawnAt,
    assetId: winner.assetId,
    rewardId: drawn.rewardId,
    allocationId: null,
    eventSourceId: cause.id,
    ...assetTerms(terms),
    code: null,
  }));
  const outcome = new OutcomeAppends(new Map());
  outcome.add(cause, `giveaway-${drawn.rewardId}`, [], [], cause.id, grants);
  await outcome.appendAndRecord(db, context);
}
