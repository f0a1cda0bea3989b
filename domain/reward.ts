import { DomainError, type Decider, type DomainEvent } from './decider.ts';
import type { GiveawayDrawnEvent } from './engagement-events.ts';
import { fromLocalised, type DetailsBlock, type LocalisedDetails } from './localised-details.ts';

export const REWARD_KINDS = ['entries', 'asset'] as const;
export type RewardKind = (typeof REWARD_KINDS)[number];

/** How a user redeems an asset (the contract's reward asset `redeemable`); copied onto every asset handed out. */
export interface Redeemable {
  additionalInformation: { variableConfigId: string; required: boolean; position: number }[];
  content: string | null;
  instructions: string | null;
  instructionsImageUrl: string | null;
  supportUrl: string | null;
  supportEmail: string | null;
  supportPhoneNumber: string | null;
  redeemByDate: string | null;
}

/** A redeemable with nothing to say: what an entries reward's winners get, and the default of an asset reward. */
export const NO_REDEEMABLE: Redeemable = {
  additionalInformation: [],
  content: null,
  instructions: null,
  instructionsImageUrl: null,
  supportUrl: null,
  supportEmail: null,
  supportPhoneNumber: null,
  redeemByDate: null,
};

interface RewardCommon<Details> {
  communityId: string;
  details: Details;
  tags: string[];
  campaigns: string[];
  additionalCommunityIds: string[];
  metadata: Record<string, unknown>;
}

/** A giveaway: entries are allocated to users, and at `drawsAt` `supply` winners each get one reward asset. */
export interface EntriesTerms {
  kind: 'entries';
  drawsAt: string;
  supply: number;
}

/** Assets handed out directly; with `codes`, each asset handed out carries one of them, never twice. */
export interface AssetTerms {
  kind: 'asset';
  redeemable: Redeemable;
  codes: string[] | null;
  expiresAt: string | null;
}

export type RewardDefinition = RewardCommon<LocalisedDetails> & (EntriesTerms | AssetTerms);

/** What `PATCH /rewards/{id}` may change; an absent field is left as it is. */
export interface RewardChanges {
  details?: LocalisedDetails;
  tags?: string[];
  drawsAt?: string;
  expiresAt?: string | null;
}

interface Audit {
  createdAt: string;
  updatedAt: string;
  createdBy: string;
  updatedBy: string;
}

/** The reward as the admin API returns it: details keyed by language; codes stay out, only their count is shown. */
export type Reward = { id: string; organisationId: string } & RewardCommon<Record<string, DetailsBlock>> &
  (EntriesTerms | { kind: 'asset'; redeemable: Redeemable; codeCount: number | null; expiresAt: string | null }) &
  Audit;

export type RewardEvent =
  | DomainEvent<'RewardCreated', RewardDefinition & { rewardId: string; organisationId: string; createdAt: string; createdBy: string }>
  | DomainEvent<'RewardUpdated', { rewardId: string; organisationId: string; changes: RewardChanges; updatedAt: string; updatedBy: string }>
  | DomainEvent<
      'RewardAllocationAdded',
      {
        rewardId: string;
        organisationId: string;
        allocationId: string;
        supply: number;
        amountToDistribute: number;
        /**
         * For a reward with codes: this allocation owns codes[firstCodeIndex, firstCodeIndex + supply). The slices
         * of a reward's allocations never overlap, so handing out the n-th unit of an allocation takes
         * codes[firstCodeIndex + n] while deciding on the allocation's stream alone.
         */
        firstCodeIndex: number | null;
        addedAt: string;
      }
    >
  | GiveawayDrawnEvent;

interface Actor {
  actor: string;
  now: string;
}

export type RewardCommand =
  | { type: 'CreateReward'; data: RewardDefinition & { rewardId: string; organisationId: string } & Actor }
  | { type: 'UpdateReward'; data: { rewardId: string; organisationId: string; changes: RewardChanges } & Actor }
  | {
      type: 'AddAllocation';
      data: { rewardId: string; organisationId: string; allocationId: string; supply: number; amountToDistribute: number; now: string };
    }
  /** The draw's outcome is computed by the job (`drawWinners` with a fresh seed); the reward records it once. */
  | { type: 'DrawGiveaway'; data: Omit<GiveawayDrawnEvent['data'], 'drawnAt' | 'communityId'> & { now: string } };

export type RewardState = { exists: false } | { exists: true; reward: Reward; allocatedSupply: number; drawn: boolean };

/** A draw happens at `drawsAt`, so from then on it is due or done. */
export function drawIsDueOrDone(drawsAt: string, now: string): boolean {
  return Date.parse(drawsAt) <= Date.parse(now);
}

function existing(state: RewardState, rewardId: string, organisationId: string): Extract<RewardState, { exists: true }> {
  // Another organisation's reward is indistinguishable from a missing one.
  if (!state.exists || state.reward.organisationId !== organisationId) throw new DomainError('not_found', `Reward ${rewardId} not found`);
  return state;
}

function checkDetails(details: LocalisedDetails): void {
  if (details.length === 0) throw new DomainError('invalid', 'details needs at least one language');
}

function checkDrawInFuture(drawsAt: string, now: string): void {
  if (drawIsDueOrDone(drawsAt, now)) throw new DomainError('invalid', 'drawsAt must be in the future', ['drawsAt']);
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

export const rewardDecider: Decider<RewardCommand, RewardEvent, RewardState> = {
  initialState: { exists: false },

  decide(command, state) {
    switch (command.type) {
      case 'CreateReward': {
        const { actor, now, ...definition } = command.data;
        if (state.exists) throw new DomainError('conflict', `Reward ${definition.rewardId} already exists`);
        checkDetails(definition.details);
        if (definition.kind === 'entries') {
          checkDrawInFuture(definition.drawsAt, now);
          if (!Number.isInteger(definition.supply) || definition.supply < 1)
            throw new DomainError('invalid', 'supply must be a whole number of winners, at least 1');
        } else if (definition.codes !== null && new Set(definition.codes).size !== definition.codes.length) {
          throw new DomainError('invalid', 'codes must be unique');
        }
        return [{ type: 'RewardCreated', data: { ...definition, createdAt: now, createdBy: actor } }];
      }

      case 'UpdateReward': {
        const { rewardId, organisationId, changes, actor, now } = command.data;
        const { reward } = existing(state, rewardId, organisationId);
        if (Object.keys(changes).length === 0) throw new DomainError('invalid', 'nothing to change');
        if (changes.details !== undefined) checkDetails(changes.details);
        if (reward.kind === 'entries') {
          if (changes.expiresAt !== undefined) throw new DomainError('invalid', 'expiresAt applies to asset rewards; an entries reward ends with its draw');
          if (changes.drawsAt !== undefined) {
            if (drawIsDueOrDone(reward.drawsAt, now)) throw new DomainError('conflict', 'The draw is due or done: its date can no longer change');
            checkDrawInFuture(changes.drawsAt, now);
          }
        } else if (changes.drawsAt !== undefined) {
          throw new DomainError('invalid', 'drawsAt applies to entries rewards');
        }
        const current = reward as unknown as Record<string, unknown>;
        const changed = Object.fromEntries(
          Object.entries(changes).filter(
            ([field, value]) => value !== undefined && !same(current[field], field === 'details' ? fromLocalised(value as LocalisedDetails) : value),
          ),
        ) as RewardChanges;
        if (Object.keys(changed).length === 0) return [];
        return [{ type: 'RewardUpdated', data: { rewardId, organisationId, changes: changed, updatedAt: now, updatedBy: actor } }];
      }

      case 'AddAllocation': {
        const { rewardId, organisationId, allocationId, supply, amountToDistribute, now } = command.data;
        const { reward, allocatedSupply } = existing(state, rewardId, organisationId);
        if (!Number.isInteger(supply) || supply < 0) throw new DomainError('invalid', 'supply must be a whole number, at least 0');
        if (!Number.isInteger(amountToDistribute) || amountToDistribute < 1)
          throw new DomainError('invalid', 'amountToDistribute must be a whole number, at least 1');
        if (reward.kind === 'entries' && drawIsDueOrDone(reward.drawsAt, now)) {
          throw new DomainError('conflict', 'The draw is due or done: entries can no longer be allocated');
        }
        const codeCount = reward.kind === 'asset' ? reward.codeCount : null;
        if (codeCount !== null && allocatedSupply + supply > codeCount) {
          throw new DomainError(
            'invalid',
            `supply ${supply} exceeds the codes left for allocations: ${codeCount - allocatedSupply} of ${codeCount} (one code per asset handed out)`,
          );
        }
        return [
          {
            type: 'RewardAllocationAdded',
            data: {
              rewardId,
              organisationId,
              allocationId,
              supply,
              amountToDistribute,
              firstCodeIndex: codeCount === null ? null : allocatedSupply,
              addedAt: now,
            },
          },
        ];
      }

      case 'DrawGiveaway': {
        const { now, ...draw } = command.data;
        const current = existing(state, draw.rewardId, draw.organisationId);
        if (current.drawn) return [];
        const { reward } = current;
        if (reward.kind !== 'entries') throw new DomainError('invalid', 'Only an entries reward is drawn');
        if (!drawIsDueOrDone(reward.drawsAt, now)) throw new DomainError('conflict', `The draw is due at ${reward.drawsAt}`);
        return [{ type: 'GiveawayDrawn', data: { ...draw, communityId: reward.communityId, drawnAt: now } }];
      }
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'RewardCreated':
        return { exists: true, reward: rewardFromCreated(event.data), allocatedSupply: 0, drawn: false };
      case 'RewardUpdated': {
        if (!state.exists) return state;
        const { changes, updatedAt, updatedBy } = event.data;
        const { details, ...rest } = changes;
        const reward = { ...state.reward, ...rest, ...(details !== undefined ? { details: fromLocalised(details) } : {}), updatedAt, updatedBy };
        return { ...state, reward: reward as Reward };
      }
      case 'RewardAllocationAdded':
        if (!state.exists) return state;
        return { ...state, allocatedSupply: state.allocatedSupply + event.data.supply };
      case 'GiveawayDrawn':
        return state.exists ? { ...state, drawn: true } : state;
    }
  },
};

function rewardFromCreated(data: Extract<RewardEvent, { type: 'RewardCreated' }>['data']): Reward {
  const common = {
    id: data.rewardId,
    organisationId: data.organisationId,
    communityId: data.communityId,
    details: fromLocalised(data.details),
    tags: data.tags,
    campaigns: data.campaigns,
    additionalCommunityIds: data.additionalCommunityIds,
    metadata: data.metadata,
  };
  const audit = { createdAt: data.createdAt, updatedAt: data.createdAt, createdBy: data.createdBy, updatedBy: data.createdBy };
  if (data.kind === 'entries') return { ...common, kind: 'entries', drawsAt: data.drawsAt, supply: data.supply, ...audit };
  return {
    ...common,
    kind: 'asset',
    redeemable: data.redeemable,
    codeCount: data.codes === null ? null : data.codes.length,
    expiresAt: data.expiresAt,
    ...audit,
  };
}
