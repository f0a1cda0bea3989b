import type { CustomEventEvent } from '../../domain/custom-event.ts';
import type { DomainEvent } from '../../domain/decider.ts';
import type {
  AllocationDistributedEvent,
  EngagementEvent,
  GiveawayDrawnEvent,
  LeaderboardWindowEvent,
  RewardAssetEvent,
  RewardAssetGrant,
} from '../../domain/engagement-events.ts';
import type { NewEvent, StreamAppend } from '../../infra/event-store/port.ts';
import { idFrom, uuidFrom } from '../../infra/ids.ts';
import { continuedTrace } from '../../infra/tracing.ts';
import type { BatchContext, Recorded } from '../process-manager.ts';
import { pairKey, recordHandOuts, type AllocationRow, type EngineDb, type EngineRewardEntryRow, type RewardTerms } from './state.ts';

/** What the engine acts on: a custom event, a closed leaderboard window, a giveaway draw. */
export type Cause = Recorded<CustomEventEvent | LeaderboardWindowEvent | GiveawayDrawnEvent>;

/** Each unit of an asset allocation is one asset, with an id derived from the unit: never granted twice. */
export function assetIdOf(allocationId: string, unit: number): string {
  return idFrom(`asset:${allocationId}:${unit}`);
}

/**
 * What causes decided, gathered for one atomic append: each cause's facts on its own stream (`no_stream`:
 * a cause is decided once), each allocation's hand-outs (from every cause, in order) at the revision the
 * engine holds, and one stream per asset unit. Then the new supplies and giveaway entries are recorded.
 *
 * Every event id derives from its cause, its stream and its index there, so deciding a cause again (after a
 * crash with another store, in a rebuild) appends nothing new.
 */
export class OutcomeAppends {
  private readonly appends: StreamAppend[] = [];
  private readonly handOuts = new Map<string, { events: NewEvent[]; facts: AllocationDistributedEvent[] }>();

  constructor(private readonly allocations: Map<string, AllocationRow>) {}

  add(
    cause: Cause,
    stream: string,
    facts: EngagementEvent[],
    distributions: AllocationDistributedEvent[],
    eventSourceId: string,
    grants: RewardAssetGrant[] = [],
  ) {
    const organisationId = cause.data.organisationId;
    const stamp = (streamName: string, index: number, event: DomainEvent, occurredAt: string): NewEvent => ({
      id: uuidFrom(`engine:${cause.id}:${streamName}:${index}`),
      type: event.type,
      data: event.data,
      metadata: {
        organisationId,
        actor: 'engine',
        causationId: cause.id,
        correlationId: cause.metadata.correlationId ?? cause.id,
        occurredAt,
        // With tracing on, each cause's facts continue its own trace, even in a batch that serves several.
        ...continuedTrace(cause.metadata),
      },
    });
    if (facts.length > 0) {
      this.appends.push({
        stream,
        expectedRevision: 'no_stream',
        events: facts.map((fact, index) => stamp(stream, index, fact, fact.data.occurredAt)),
      });
    }
    const assets = [...grants];
    distributions.forEach((distribution, index) => {
      const row = this.allocations.get(distribution.data.allocationId)!;
      const entry = this.handOuts.get(row.id) ?? { events: [], facts: [] };
      entry.events.push(stamp(`allocation-${row.id}`, index, distribution, distribution.data.occurredAt));
      entry.facts.push(distribution);
      this.handOuts.set(row.id, entry);
      if (row.kind !== 'asset') return;
      for (let unit = distribution.data.firstUnit; unit < distribution.data.firstUnit + distribution.data.amount; unit++) {
        assets.push({
          ...pick(distribution.data),
          assetId: assetIdOf(row.id, unit),
          rewardId: row.reward_id,
          allocationId: row.id,
          eventSourceId,
          ...assetTerms(row.terms),
          code: row.first_code_index === null || row.terms.codes === null ? null : (row.terms.codes[row.first_code_index + unit] ?? null),
        });
      }
    });
    for (const grant of assets) {
      const assetStream = `rewardasset-${grant.assetId}`;
      const granted: RewardAssetEvent = { type: 'RewardAssetGranted', data: grant };
      this.appends.push({ stream: assetStream, expectedRevision: 'no_stream', events: [stamp(assetStream, 0, granted, grant.occurredAt)] });
    }
  }

  /**
   * Appends everything in one call (in the batch's transaction with the PostgreSQL store), each allocation's
   * hand-outs at the revision the engine holds for its stream, then records the allocations' new supply and
   * revision and the giveaway entries.
   */
  async appendAndRecord(db: EngineDb, context: BatchContext): Promise<void> {
    const allocationAppends: StreamAppend[] = [...this.handOuts].map(([allocationId, { events }]) => {
      const revision = this.allocations.get(allocationId)!.revision;
      return { stream: `allocation-${allocationId}`, expectedRevision: revision === null ? 'no_stream' : BigInt(revision), events };
    });
    const appends = [...this.appends, ...allocationAppends];
    if (appends.length === 0) return;
    const results = await context.append(appends);
    const revisions = new Map(results.map((result) => [result.stream, result.nextExpectedRevision]));
    const allocations = [...this.handOuts].map(([allocationId, { facts }]) => ({
      row: this.allocations.get(allocationId)!,
      amount: facts.reduce((sum, handOut) => sum + handOut.data.amount, 0),
      revision: revisions.get(`allocation-${allocationId}`)!,
    }));
    const entries = new Map<string, EngineRewardEntryRow>();
    for (const { facts } of this.handOuts.values()) {
      for (const { data } of facts) {
        if (data.rewardKind !== 'entries') continue;
        const key = pairKey(data.rewardId, data.userId);
        const row = entries.get(key) ?? { reward_id: data.rewardId, user_id: data.userId, entries: 0 };
        row.entries += data.amount;
        entries.set(key, row);
      }
    }
    await recordHandOuts(db, allocations, [...entries.values()]);
  }
}

function pick(data: { organisationId: string; communityId: string; userId: string; occurredAt: string }) {
  return { organisationId: data.organisationId, communityId: data.communityId, userId: data.userId, occurredAt: data.occurredAt };
}

/** What an asset copies from its reward's terms. */
export function assetTerms(terms: RewardTerms) {
  return {
    details: terms.details,
    tags: terms.tags,
    campaigns: terms.campaigns,
    additionalCommunityIds: terms.additionalCommunityIds,
    metadata: terms.metadata,
    redeemable: terms.redeemable,
    expiresAt: terms.expiresAt,
  };
}
