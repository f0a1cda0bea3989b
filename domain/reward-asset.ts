import { DomainError, type Decider } from './decider.ts';
import type { RewardAssetEvent, RewardAssetGrant } from './engagement-events.ts';
import { pickDetails, type DetailsBlock, type LocalisedDetails } from './localised-details.ts';
import type { Redeemable } from './reward.ts';

/**
 * A reward asset: one unit of a reward handed to one user (by an asset allocation, a leaderboard rank or a
 * giveaway draw), on its own stream `rewardasset-<assetId>`. The engine grants it; the user claims it, then
 * redeems it (before `redeemable.redeemByDate`, supplying the information the reward asks for), unless it
 * has expired (`expiresAt`). Every step happens once: a claim twice is a no-op, a second redemption a conflict.
 */
export interface RewardAsset {
  id: string;
  organisationId: string;
  communityId: string;
  rewardId: string;
  /** Null for a giveaway winner's asset: it comes from the draw, not from an allocation. */
  allocationId: string | null;
  userId: string;
  eventSourceId: string;
  /** The reward's details by language as they were when the asset was granted. */
  details: Record<string, DetailsBlock>;
  tags: string[];
  campaigns: string[];
  additionalCommunityIds: string[];
  metadata: Record<string, unknown>;
  /** The reward's redeemable; `content` is this unit's code when the reward has codes. */
  redeemable: Redeemable;
  createdAt: string;
  updatedAt: string;
  claimedAt: string | null;
  redeemedAt: string | null;
  expiresAt: string | null;
}

/** What the user supplies when redeeming: values of the variables the reward's `additionalInformation` names. */
export interface RedemptionInformation {
  variableConfigId: string;
  value: string;
}

export type RewardAssetCommand =
  | { type: 'GrantRewardAsset'; data: RewardAssetGrant }
  | { type: 'ClaimRewardAsset'; data: { assetId: string; organisationId: string; userId: string; now: string } }
  | {
      type: 'RedeemRewardAsset';
      data: { assetId: string; organisationId: string; userId: string; information: RedemptionInformation[]; now: string };
    };

export type RewardAssetState = { exists: false } | { exists: true; asset: RewardAsset };

/** The asset as granted: the unit's code, when it has one, is what the user gets as `redeemable.content`. */
export function assetFromGrant(grant: RewardAssetGrant): RewardAsset {
  return {
    id: grant.assetId,
    organisationId: grant.organisationId,
    communityId: grant.communityId,
    rewardId: grant.rewardId,
    allocationId: grant.allocationId,
    userId: grant.userId,
    eventSourceId: grant.eventSourceId,
    details: grant.details,
    tags: grant.tags,
    campaigns: grant.campaigns,
    additionalCommunityIds: grant.additionalCommunityIds,
    metadata: grant.metadata,
    redeemable: { ...grant.redeemable, content: grant.code ?? grant.redeemable.content },
    createdAt: grant.occurredAt,
    updatedAt: grant.occurredAt,
    claimedAt: null,
    redeemedAt: null,
    expiresAt: grant.expiresAt,
  };
}

/** An asset expires at `expiresAt` (from then on it can be neither claimed nor redeemed). */
export function hasExpired(asset: Pick<RewardAsset, 'expiresAt'>, now: string): boolean {
  return asset.expiresAt !== null && Date.parse(asset.expiresAt) <= Date.parse(now);
}

/** `redeemByDate` is the last moment a redemption is accepted. */
export function pastRedeemBy(asset: Pick<RewardAsset, 'redeemable'>, now: string): boolean {
  const by = asset.redeemable.redeemByDate;
  return by !== null && Date.parse(now) > Date.parse(by);
}

function owned(state: RewardAssetState, assetId: string, organisationId: string, userId: string): RewardAsset {
  // Another user's (or organisation's) asset is indistinguishable from a missing one.
  if (!state.exists || state.asset.organisationId !== organisationId || state.asset.userId !== userId) {
    throw new DomainError('not_found', `Reward asset ${assetId} not found`);
  }
  return state.asset;
}

function checkInformation(redeemable: Redeemable, information: RedemptionInformation[]): void {
  const asked = new Set(redeemable.additionalInformation.map((item) => item.variableConfigId));
  const given = new Set<string>();
  for (const { variableConfigId } of information) {
    if (given.has(variableConfigId)) throw new DomainError('invalid', `information: ${variableConfigId} is given twice`);
    if (!asked.has(variableConfigId)) throw new DomainError('invalid', `information: ${variableConfigId} is not asked for by this reward`);
    given.add(variableConfigId);
  }
  const supplied = new Set(information.filter((item) => item.value.trim() !== '').map((item) => item.variableConfigId));
  const missing = [...redeemable.additionalInformation]
    .sort((a, b) => a.position - b.position)
    .filter((item) => item.required && !supplied.has(item.variableConfigId))
    .map((item) => item.variableConfigId);
  if (missing.length > 0) throw new DomainError('invalid', `information: required variable${missing.length > 1 ? 's' : ''} missing: ${missing.join(', ')}`);
}

export const rewardAssetDecider: Decider<RewardAssetCommand, RewardAssetEvent, RewardAssetState> = {
  initialState: { exists: false },

  decide(command, state) {
    switch (command.type) {
      case 'GrantRewardAsset':
        if (state.exists) throw new DomainError('conflict', `Reward asset ${command.data.assetId} was already granted`);
        return [{ type: 'RewardAssetGranted', data: command.data }];

      case 'ClaimRewardAsset': {
        const { assetId, organisationId, userId, now } = command.data;
        const asset = owned(state, assetId, organisationId, userId);
        if (asset.claimedAt !== null) return [];
        if (hasExpired(asset, now)) throw new DomainError('conflict', `Reward asset ${assetId} expired at ${asset.expiresAt}: it can no longer be claimed`);
        return [{ type: 'RewardAssetClaimed', data: { assetId, organisationId, userId, claimedAt: now } }];
      }

      case 'RedeemRewardAsset': {
        const { assetId, organisationId, userId, information, now } = command.data;
        const asset = owned(state, assetId, organisationId, userId);
        if (asset.claimedAt === null) throw new DomainError('conflict', `Reward asset ${assetId} must be claimed before it is redeemed`);
        if (asset.redeemedAt !== null) throw new DomainError('conflict', `Reward asset ${assetId} was already redeemed at ${asset.redeemedAt}`);
        if (hasExpired(asset, now)) throw new DomainError('conflict', `Reward asset ${assetId} expired at ${asset.expiresAt}: it can no longer be redeemed`);
        if (pastRedeemBy(asset, now)) {
          throw new DomainError('conflict', `Reward asset ${assetId} had to be redeemed by ${asset.redeemable.redeemByDate}`);
        }
        checkInformation(asset.redeemable, information);
        return [{ type: 'RewardAssetRedeemed', data: { assetId, organisationId, userId, redeemedAt: now, information } }];
      }
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'RewardAssetGranted':
        return state.exists ? state : { exists: true, asset: assetFromGrant(event.data) };
      case 'RewardAssetClaimed':
        if (!state.exists) return state;
        return { exists: true, asset: { ...state.asset, claimedAt: event.data.claimedAt, updatedAt: event.data.claimedAt } };
      case 'RewardAssetRedeemed':
        if (!state.exists) return state;
        return { exists: true, asset: { ...state.asset, redeemedAt: event.data.redeemedAt, updatedAt: event.data.redeemedAt } };
    }
  },
};

/**
 * The asset's details as a list, its reward's languages first in the reward's order: JSONB (the event store
 * and the read models) does not keep key order, and "the first language" is the last fallback of a
 * localised read.
 */
export function detailsInOrder(details: Record<string, DetailsBlock>, rewardLanguages: readonly string[]): LocalisedDetails {
  const rank = (language: string) => {
    const index = rewardLanguages.findIndex((candidate) => candidate.toLowerCase() === language.toLowerCase());
    return index === -1 ? rewardLanguages.length : index;
  };
  return Object.entries(details)
    .map(([language, block]) => ({ language, ...block }))
    .sort((a, b) => rank(a.language) - rank(b.language) || (a.language < b.language ? -1 : a.language > b.language ? 1 : 0));
}

/** The contract's reward asset record: one details block, in the wanted language (see `pickDetails`). */
export type RewardAssetView = Omit<RewardAsset, 'details'> & { details: DetailsBlock };

export function rewardAssetView(
  asset: RewardAsset,
  language: { wanted: string | undefined; organisationDefault: string | undefined; rewardLanguages: readonly string[] },
): RewardAssetView {
  return { ...asset, details: pickDetails(detailsInOrder(asset.details, language.rewardLanguages), language.wanted, language.organisationDefault) };
}
