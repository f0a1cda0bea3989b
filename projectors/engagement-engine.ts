import { sql, type Kysely } from 'kysely';
import { challengeDecider, type ChallengeEvent, type ChallengeRecord, type ChallengeState } from '../domain/challenge.ts';
import type { CustomEventLoggedData } from '../domain/custom-event.ts';
import type { DistributionEntry } from '../domain/distribution-entry.ts';
import {
  NO_STREAK,
  LEADERBOARD_XP_CATEGORY,
  decideCustomEvent,
  distributeEntry,
  ledgerEvents,
  type AllocationSupply,
  type ChallengeProgress,
  type StreakState,
} from '../domain/engagement.ts';
import type {
  AllocationDistributedEvent,
  EngagementEvent,
  GiveawayDrawnEvent,
  LeaderboardWindowEvent,
  PayoutSource,
  RewardAssetEvent,
  RewardAssetGrant,
} from '../domain/engagement-events.ts';
import type { LeaderboardEvent, RankDistribution } from '../domain/leaderboard.ts';
import { fromLocalised } from '../domain/localised-details.ts';
import { NO_REDEEMABLE, type Redeemable, type RewardEvent } from '../domain/reward.ts';
import type { AllocationEvent } from '../domain/allocation.ts';
import type { DomainEvent } from '../domain/decider.ts';
import type { NewEvent, RecordedEvent, StreamAppend } from '../infra/event-store/port.ts';
import { idFrom, uuidFrom } from '../infra/ids.ts';
import { forgetInBatch, perBatch } from './batch-cache.ts';
import { createTimeZoneTable, recordTimeZone, timeZoneOf } from './organisation-time-zones.ts';
import type { LegacyProjection as Projection } from './legacy.ts';
type ProjectionContext = Parameters<Projection['apply']>[2];

export const ENGINE_PROJECTION = 'engagement_engine';

/** Each unit of an asset allocation is one asset, with an id derived from the unit: never granted twice. */
export function assetIdOf(allocationId: string, unit: number): string {
  return idFrom(`asset:${allocationId}:${unit}`);
}

/** The stream a leaderboard window's frozen standings go to: one per (leaderboard, window), so it closes once. */
export function leaderboardWindowStream(leaderboardId: string, windowStart: string): string {
  return `leaderboardwindow-${leaderboardId}-${Date.parse(windowStart)}`;
}

/**
 * The engagement engine: a process manager that turns custom events into engagement facts (DESIGN §6),
 * pays leaderboard rank rewards when a window closes, and grants giveaway winners their assets.
 *
 * It is the only writer of `AllocationDistributed`, and one runner at a time applies its batches (the
 * runtime's lease and checkpoint compare-and-set), so its own table of allocations is the truth it decides
 * on; it still appends at the allocation stream's revision, so even a rogue writer could not over-distribute.
 * With the PostgreSQL store its events are appended in the batch's transaction: the facts and the checkpoint
 * past their cause commit together, so nothing is decided twice or lost. Event ids derive from the cause, so
 * applying a cause again (another store, a rebuild) appends nothing new.
 */
export const engagementEngine: Projection = {
  name: ENGINE_PROJECTION,
  version: 1,
  tables: ['engine_reward_entries', 'engine_allocations'],
  onFailure: { attempts: 5, then: 'park' },
  filter: {
    eventTypes: [
      'OrganisationCreated',
      'OrganisationSettingsChanged',
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
      'CustomEventLogged',
      'LeaderboardWindowClosed',
      'GiveawayDrawn',
    ],
  },
  migrations: {
    '0001_engine_state': {
      async up(db) {
        await createTimeZoneTable(db, 'engine_organisations');
        await db.schema
          .createTable('engine_challenges')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('community_id', 'text', (c) => c.notNull())
          .addColumn('record', 'jsonb', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('engine_challenges_by_community').on('engine_challenges').column('community_id').execute();
        await db.schema
          .createTable('engine_rewards')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('community_id', 'text', (c) => c.notNull())
          .addColumn('kind', 'text', (c) => c.notNull())
          .addColumn('draws_at', 'text')
          .addColumn('terms', 'jsonb', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('engine_allocations')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('reward_id', 'text', (c) => c.notNull())
          .addColumn('supply', 'integer', (c) => c.notNull())
          .addColumn('distributed', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('first_code_index', 'integer')
          // The allocation stream's revision as the engine last wrote or read it; null: no stream yet.
          .addColumn('revision', 'bigint')
          .execute();
        await db.schema
          .createTable('engine_progress')
          .addColumn('user_id', 'text', (c) => c.notNull())
          .addColumn('challenge_id', 'text', (c) => c.notNull())
          .addColumn('state', 'jsonb', (c) => c.notNull())
          .addPrimaryKeyConstraint('engine_progress_pk', ['user_id', 'challenge_id'])
          .execute();
        await db.schema
          .createTable('engine_members')
          .addColumn('user_id', 'text', (c) => c.notNull())
          .addColumn('community_id', 'text', (c) => c.notNull())
          .addColumn('streak', 'jsonb', (c) => c.notNull())
          .addColumn('last_active_at', 'timestamptz', (c) => c.notNull())
          .addPrimaryKeyConstraint('engine_members_pk', ['user_id', 'community_id'])
          .execute();
        await db.schema
          .createTable('engine_leaderboards')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('community_id', 'text')
          .addColumn('rewards', 'jsonb', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('engine_reward_entries')
          .addColumn('reward_id', 'text', (c) => c.notNull())
          .addColumn('user_id', 'text', (c) => c.notNull())
          .addColumn('entries', 'integer', (c) => c.notNull())
          .addPrimaryKeyConstraint('engine_reward_entries_pk', ['reward_id', 'user_id'])
          .execute();
      },
    },
  },

  async applyBatch(db, events, context) {
    // Runs of custom events are engaged together; everything else in log order between them.
    let run: LoggedEvent[] = [];
    for (const event of events) {
      if (event.type === 'CustomEventLogged') {
        run.push(event as LoggedEvent);
        continue;
      }
      if (run.length > 0) await engageCustomEvents(db, run, context);
      run = [];
      await engagementEngine.apply(db, event, context);
    }
    if (run.length > 0) await engageCustomEvents(db, run, context);
  },

  async apply(db, event, context) {
    switch (event.type) {
      case 'OrganisationCreated':
      case 'OrganisationSettingsChanged':
        return recordTimeZone(db, 'engine_organisations', event);
      case 'ChallengeCreated':
      case 'ChallengeUpdated':
      case 'ActionDistributionAssigned':
        return foldChallenge(db, event as unknown as ChallengeEvent);
      case 'RewardCreated':
      case 'RewardUpdated':
        return foldReward(db, event as unknown as RewardEvent);
      case 'RewardAllocationAdded': {
        const { allocationId, rewardId, supply, firstCodeIndex } = (event as unknown as Extract<RewardEvent, { type: 'RewardAllocationAdded' }>).data;
        await db
          .insertInto('engine_allocations')
          .values({ id: allocationId, reward_id: rewardId, supply, first_code_index: firstCodeIndex })
          .onConflict((oc) => oc.column('id').doUpdateSet({ supply, first_code_index: firstCodeIndex }))
          .execute();
        return;
      }
      case 'AllocationCreated': {
        const { allocationId, rewardId, supply } = (event as unknown as AllocationEvent).data;
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
        return foldLeaderboard(db, event as unknown as LeaderboardEvent);
      case 'CustomEventLogged':
        return engageCustomEvents(db, [event as LoggedEvent], context);
      case 'LeaderboardWindowClosed':
        return payRankRewards(db, event as RecordedEvent<'LeaderboardWindowClosed', LeaderboardWindowEvent['data']>, context);
      case 'GiveawayDrawn':
        return grantGiveawayAssets(db, event as RecordedEvent<'GiveawayDrawn', GiveawayDrawnEvent['data']>, context);
    }
  },
};

/** Allocations named by a distribution are known to the engine even when no reward allocation created them. */
async function registerAllocations(db: Kysely<any>, entries: Pick<DistributionEntry, 'rewardsConfig'>[]): Promise<void> {
  const rows = entries.flatMap((entry) => entry.rewardsConfig.allocations.map((a) => ({ id: a.id, reward_id: a.rewardId, supply: a.supply })));
  if (rows.length > 0)
    await db
      .insertInto('engine_allocations')
      .values(rows)
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
}

async function foldChallenge(db: Kysely<any>, event: ChallengeEvent): Promise<void> {
  const { challengeId } = event.data;
  const row = await db.selectFrom('engine_challenges').select('record').where('id', '=', challengeId).executeTakeFirst();
  const current: ChallengeState = row ? { exists: true, ...(row.record as ChallengeRecord) } : challengeDecider.initialState;
  const next = challengeDecider.evolve(current, event);
  if (!next.exists) return;
  const { exists: _exists, ...record } = next;
  forgetInBatch(db, `challenges:${record.communityId}`);
  await db
    .insertInto('engine_challenges')
    .values({ id: challengeId, community_id: record.communityId, record: JSON.stringify(record) })
    .onConflict((oc) => oc.column('id').doUpdateSet({ record: JSON.stringify(record) }))
    .execute();
  await registerAllocations(
    db,
    record.actions.flatMap((action) => (action.distribution ? [action.distribution] : [])),
  );
}

interface RewardTerms {
  details: RewardAssetGrant['details'];
  tags: string[];
  campaigns: string[];
  additionalCommunityIds: string[];
  metadata: Record<string, unknown>;
  redeemable: Redeemable;
  codes: string[] | null;
  expiresAt: string | null;
}

async function foldReward(db: Kysely<any>, event: RewardEvent): Promise<void> {
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
  if (event.type !== 'RewardUpdated') return;
  const row = await db.selectFrom('engine_rewards').select(['terms', 'draws_at']).where('id', '=', event.data.rewardId).executeTakeFirst();
  if (!row) return;
  const { details, tags, drawsAt, expiresAt } = event.data.changes;
  const terms = row.terms as RewardTerms;
  const next: RewardTerms = {
    ...terms,
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

async function foldLeaderboard(db: Kysely<any>, event: LeaderboardEvent): Promise<void> {
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

interface AllocationRow {
  id: string;
  reward_id: string;
  supply: number;
  distributed: number;
  first_code_index: number | null;
  revision: string | null;
  kind: 'entries' | 'asset';
  draws_at: string | null;
  organisation_id: string;
  community_id: string;
  terms: RewardTerms;
}

/** The allocations with these ids whose reward the engine knows, keyed by id. */
async function loadAllocations(db: Kysely<any>, ids: string[]): Promise<Map<string, AllocationRow>> {
  if (ids.length === 0) return new Map();
  const rows = (await db
    .selectFrom('engine_allocations as a')
    .innerJoin('engine_rewards as r', 'r.id', 'a.reward_id')
    .select([
      'a.id',
      'a.reward_id',
      'a.supply',
      'a.distributed',
      'a.first_code_index',
      'a.revision',
      'r.kind',
      'r.draws_at',
      'r.organisation_id',
      'r.community_id',
      'r.terms',
    ])
    .where('a.id', 'in', [...new Set(ids)])
    .execute()) as AllocationRow[];
  return new Map(rows.map((row) => [row.id, row]));
}

function supplies(rows: Map<string, AllocationRow>): Map<string, AllocationSupply> {
  return new Map(
    [...rows.values()].map((row) => [
      row.id,
      { allocationId: row.id, rewardId: row.reward_id, rewardKind: row.kind, supply: row.supply, distributed: row.distributed, drawsAt: row.draws_at },
    ]),
  );
}

/** A community's challenges, read once per batch (the engine's own writes forget them). */
function challengesOf(db: Kysely<any>, communityId: string): Promise<ChallengeRecord[]> {
  return perBatch(db, `challenges:${communityId}`, async () =>
    (await db.selectFrom('engine_challenges').select('record').where('community_id', '=', communityId).orderBy('id').execute()).map(
      (row) => row.record as ChallengeRecord,
    ),
  );
}

type LoggedEvent = RecordedEvent<'CustomEventLogged', CustomEventLoggedData>;

const pairKey = (a: string, b: string) => `${a} ${b}`;

/** Rows whose (a, b) pair is one of these, in one query. */
function pairIn(a: string, b: string, pairs: [string, string][]) {
  return sql<boolean>`(${sql.ref(a)}, ${sql.ref(b)}) in (${sql.join(pairs.map(([x, y]) => sql`(${x}, ${y})`))})`;
}

/**
 * Engages a run of custom events as one unit of work: the state they need is read in three queries, each
 * is decided in log order against the state the earlier ones left (the same user twice in a run works),
 * everything they cause is appended in one call, and the new state is written in bulk.
 */
async function engageCustomEvents(db: Kysely<any>, causes: LoggedEvent[], context: ProjectionContext): Promise<void> {
  const plans: { cause: LoggedEvent; challenges: ChallengeRecord[] }[] = [];
  for (const cause of causes) {
    const { communityId, organisationId, name } = cause.data;
    const challenges = (await challengesOf(db, communityId)).filter(
      (challenge) => challenge.organisationId === organisationId && challenge.actions.some((action) => action.key === name),
    );
    plans.push({ cause, challenges });
  }
  const memberPairs = unique(causes.map((cause) => [cause.data.userId, cause.data.communityId] as [string, string]));
  const progressPairs = unique(plans.flatMap(({ cause, challenges }) => challenges.map((c) => [cause.data.userId, c.challengeId] as [string, string])));
  const [memberRows, progressRows, rows] = await Promise.all([
    db
      .selectFrom('engine_members')
      .select(['user_id', 'community_id', 'streak', 'last_active_at'])
      .where(pairIn('user_id', 'community_id', memberPairs))
      .execute(),
    progressPairs.length === 0
      ? Promise.resolve([])
      : db
          .selectFrom('engine_progress')
          .select(['user_id', 'challenge_id', 'state'])
          .where(pairIn('user_id', 'challenge_id', progressPairs))
          .execute(),
    loadAllocations(
      db,
      plans.flatMap(({ challenges }) => challenges.flatMap(allocationIdsOf)),
    ),
  ]);
  const members = new Map(
    memberRows.map((row) => [
      pairKey(row.user_id, row.community_id),
      { streak: row.streak as StreakState, lastActiveAt: new Date(row.last_active_at).toISOString() },
    ]),
  );
  const progress = new Map(progressRows.map((row) => [pairKey(row.user_id, row.challenge_id), row.state as ChallengeProgress]));
  const changedProgress = new Set<string>();
  let allocations = supplies(rows);
  const outcome = new OutcomeAppends(rows);

  for (const { cause, challenges } of plans) {
    const event = cause.data;
    const memberKey = pairKey(event.userId, event.communityId);
    const member = members.get(memberKey);
    let streak = member?.streak ?? NO_STREAK;
    if (challenges.length > 0) {
      const decided = decideCustomEvent({
        event,
        timeZone: await timeZoneOf(db, 'engine_organisations', event.organisationId),
        challenges,
        progress: new Map(
          challenges.flatMap((c) => {
            const state = progress.get(pairKey(event.userId, c.challengeId));
            return state ? [[c.challengeId, state] as const] : [];
          }),
        ),
        allocations,
        streak,
      });
      allocations = decided.allocations;
      streak = decided.streak;
      for (const [challengeId, state] of decided.progress) {
        const key = pairKey(event.userId, challengeId);
        if (progress.get(key) === state) continue;
        progress.set(key, state);
        changedProgress.add(key);
      }
      outcome.add(cause, `engagement-${event.eventId}`, decided.events, decided.distributions, event.eventId);
    }
    const lastActiveAt = member && member.lastActiveAt > event.occurredAt ? member.lastActiveAt : event.occurredAt;
    members.set(memberKey, { streak, lastActiveAt });
  }

  await outcome.appendAndRecord(db, context);
  await db
    .insertInto('engine_members')
    .values(
      memberPairs.map(([userId, communityId]) => {
        const member = members.get(pairKey(userId, communityId))!;
        return { user_id: userId, community_id: communityId, streak: JSON.stringify(member.streak), last_active_at: member.lastActiveAt };
      }),
    )
    .onConflict((oc) => oc.columns(['user_id', 'community_id']).doUpdateSet({ streak: sql`excluded.streak`, last_active_at: sql`excluded.last_active_at` }))
    .execute();
  if (changedProgress.size > 0) {
    await db
      .insertInto('engine_progress')
      .values(
        [...changedProgress].map((key) => {
          const [userId, challengeId] = key.split(' ') as [string, string];
          return { user_id: userId, challenge_id: challengeId, state: JSON.stringify(progress.get(key)) };
        }),
      )
      .onConflict((oc) => oc.columns(['user_id', 'challenge_id']).doUpdateSet({ state: sql`excluded.state` }))
      .execute();
  }
}

function allocationIdsOf(challenge: ChallengeRecord): string[] {
  return [
    ...challenge.actions.flatMap((action) => action.distribution?.rewardsConfig.allocations.map((a) => a.id) ?? []),
    ...challenge.rewardDistribution.rewardAllocations.map((a) => a.allocationId),
  ];
}

function unique(pairs: [string, string][]): [string, string][] {
  return [...new Map(pairs.map((pair) => [pairKey(...pair), pair])).values()];
}

/**
 * What causes decided, gathered for one atomic append: each cause's facts on its own stream (`no_stream`:
 * a cause is decided once), each allocation's hand-outs (from every cause, in order) at the revision the
 * engine holds, and one stream per asset unit. Then the new supplies and giveaway entries are recorded.
 */
class OutcomeAppends {
  private readonly appends: StreamAppend[] = [];
  private readonly handOuts = new Map<string, { events: NewEvent[]; facts: AllocationDistributedEvent[] }>();

  constructor(private readonly allocations: Map<string, AllocationRow>) {}

  add(
    cause: RecordedEvent,
    stream: string,
    facts: DomainEvent[],
    distributions: AllocationDistributedEvent[],
    eventSourceId: string,
    grants: RewardAssetGrant[] = [],
  ) {
    const organisationId = (cause.data as { organisationId?: string }).organisationId ?? cause.metadata.organisationId;
    const stamp = (streamName: string, index: number, event: DomainEvent, occurredAt: string): NewEvent => ({
      id: uuidFrom(`engine:${cause.id}:${streamName}:${index}`),
      type: event.type,
      data: event.data,
      metadata: { organisationId, actor: 'engine', causationId: cause.id, correlationId: cause.metadata.correlationId ?? cause.id, occurredAt },
    });
    if (facts.length > 0) {
      this.appends.push({
        stream,
        expectedRevision: 'no_stream',
        events: facts.map((fact, index) => stamp(stream, index, fact, (fact.data as { occurredAt: string }).occurredAt)),
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

  async appendAndRecord(db: Kysely<any>, context: ProjectionContext): Promise<void> {
    const allocationAppends: StreamAppend[] = [...this.handOuts].map(([allocationId, { events }]) => {
      const revision = this.allocations.get(allocationId)!.revision;
      return { stream: `allocation-${allocationId}`, expectedRevision: revision === null ? 'no_stream' : BigInt(revision), events };
    });
    const appends = [...this.appends, ...allocationAppends];
    if (appends.length === 0) return;
    const results = await context.append(appends);
    for (const [allocationId, { facts }] of this.handOuts) {
      const result = results.find((candidate) => candidate.stream === `allocation-${allocationId}`)!;
      const amount = facts.reduce((sum, handOut) => sum + handOut.data.amount, 0);
      await db
        .updateTable('engine_allocations')
        .set({ distributed: sql`distributed + ${amount}`, revision: result.nextExpectedRevision.toString() })
        .where('id', '=', allocationId)
        .execute();
    }
    const entries = new Map<string, { reward_id: string; user_id: string; entries: number }>();
    for (const { facts } of this.handOuts.values()) {
      for (const { data } of facts) {
        if (data.rewardKind !== 'entries') continue;
        const key = pairKey(data.rewardId, data.userId);
        const row = entries.get(key) ?? { reward_id: data.rewardId, user_id: data.userId, entries: 0 };
        row.entries += data.amount;
        entries.set(key, row);
      }
    }
    if (entries.size > 0) {
      await db
        .insertInto('engine_reward_entries')
        .values([...entries.values()])
        .onConflict((oc) => oc.columns(['reward_id', 'user_id']).doUpdateSet({ entries: sql`engine_reward_entries.entries + excluded.entries` }))
        .execute();
    }
  }
}

function pick(data: { organisationId: string; communityId: string; userId: string; occurredAt: string }) {
  return { organisationId: data.organisationId, communityId: data.communityId, userId: data.userId, occurredAt: data.occurredAt };
}

function assetTerms(terms: RewardTerms) {
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

/**
 * Where each user's leaderboard pay-out lands: the leaderboard's community, else where the user was last
 * active (ties by community id), for all the rewarded users in one query.
 */
async function payoutCommunities(db: Kysely<any>, leaderboardCommunity: string | null, userIds: string[]): Promise<Map<string, string>> {
  if (leaderboardCommunity) return new Map(userIds.map((userId) => [userId, leaderboardCommunity]));
  if (userIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('engine_members')
    .select(['user_id', 'community_id'])
    .distinctOn('user_id')
    .where('user_id', 'in', userIds)
    .orderBy('user_id')
    .orderBy('last_active_at', 'desc')
    .orderBy('community_id')
    .execute();
  return new Map(rows.map((row) => [row.user_id as string, row.community_id as string]));
}

/** Rank rewards once per (leaderboard, window, user, tier): the window closes once, and this applies once. */
async function payRankRewards(
  db: Kysely<any>,
  cause: RecordedEvent<'LeaderboardWindowClosed', LeaderboardWindowEvent['data']>,
  context: ProjectionContext,
): Promise<void> {
  const closed = cause.data;
  const leaderboard = await db.selectFrom('engine_leaderboards').select(['community_id', 'rewards']).where('id', '=', closed.leaderboardId).executeTakeFirst();
  if (!leaderboard) return;
  const tiers = leaderboard.rewards as RankDistribution[];
  const rows = await loadAllocations(
    db,
    tiers.flatMap((tier) => tier.rewardsConfig.allocations.map((a) => a.id)),
  );
  const allocations = supplies(rows);
  const rewarded = (tier: RankDistribution) => closed.standings.filter((s) => s.rank >= tier.startRank && s.rank <= tier.endRank);
  const communities = await payoutCommunities(
    db,
    leaderboard.community_id as string | null,
    tiers.flatMap((tier) => rewarded(tier).map((standing) => standing.userId)),
  );
  const facts: EngagementEvent[] = [];
  const distributions: AllocationDistributedEvent[] = [];
  for (const tier of tiers) {
    for (const standing of rewarded(tier)) {
      const communityId = communities.get(standing.userId);
      if (!communityId) continue;
      const who = { organisationId: closed.organisationId, communityId, userId: standing.userId, occurredAt: closed.windowEnd };
      const source: PayoutSource = {
        kind: 'leaderboard',
        leaderboardId: closed.leaderboardId,
        windowStart: closed.windowStart,
        startRank: tier.startRank,
        endRank: tier.endRank,
        rank: standing.rank,
      };
      facts.push(...ledgerEvents(who, tier.pointsToDistribute, tier.bonusXpToDistribute, LEADERBOARD_XP_CATEGORY, source));
      distributions.push(...distributeEntry(allocations, tier, who, source));
    }
  }
  const outcome = new OutcomeAppends(rows);
  outcome.add(cause, `leaderboardpayout-${closed.leaderboardId}-${Date.parse(closed.windowStart)}`, facts, distributions, cause.id);
  await outcome.appendAndRecord(db, context);
}

async function grantGiveawayAssets(
  db: Kysely<any>,
  cause: RecordedEvent<'GiveawayDrawn', GiveawayDrawnEvent['data']>,
  context: ProjectionContext,
): Promise<void> {
  const drawn = cause.data;
  const reward = await db.selectFrom('engine_rewards').select(['terms']).where('id', '=', drawn.rewardId).executeTakeFirst();
  if (!reward) return;
  const terms = reward.terms as RewardTerms;
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
