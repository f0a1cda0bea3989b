import { sql, type ColumnType, type Generated, type Kysely, type Migration } from 'kysely';
import type { ChallengeRecord } from '../../domain/challenge.ts';
import type { DistributionEntry } from '../../domain/distribution-entry.ts';
import type { AllocationSupply, ChallengeProgress, StreakState } from '../../domain/engagement.ts';
import type { RewardAssetGrant } from '../../domain/engagement-events.ts';
import type { RankDistribution } from '../../domain/leaderboard.ts';
import type { Redeemable, RewardKind } from '../../domain/reward.ts';
import { createTimeZoneTable, type TimeZoneRow } from '../../projectors/organisation-time-zones.ts';
import { unnestRows } from '../../projectors/unnest.ts';

export const ENGINE_PROCESS = 'engagement_engine';

/**
 * The engine's private state (its own schema, never exposed as views): what it knows of the admin side
 * (challenges, rewards, allocations, leaderboards, time zones) and of each user (progress, streaks, giveaway
 * entries). It is the only writer of `AllocationDistributed`, so its allocations table is the truth it
 * decides supply on. JSON columns are written as text and read back parsed.
 */
export interface EngineState {
  engine_organisations: TimeZoneRow;
  engine_challenges: EngineChallengeRow;
  engine_rewards: EngineRewardRow;
  engine_allocations: EngineAllocationRow;
  engine_progress: EngineProgressRow;
  engine_members: EngineMemberRow;
  engine_leaderboards: EngineLeaderboardRow;
  engine_reward_entries: EngineRewardEntryRow;
}

type Json<T> = ColumnType<T, string, string>;

export interface EngineChallengeRow {
  id: string;
  community_id: string;
  record: Json<ChallengeRecord>;
}

/** What an asset handed out from a reward copies from it, as the reward was when the asset was granted. */
export interface RewardTerms {
  details: RewardAssetGrant['details'];
  tags: string[];
  campaigns: string[];
  additionalCommunityIds: string[];
  metadata: Record<string, unknown>;
  redeemable: Redeemable;
  codes: string[] | null;
  expiresAt: string | null;
}

export interface EngineRewardRow {
  id: string;
  organisation_id: string;
  community_id: string;
  kind: RewardKind;
  draws_at: string | null;
  terms: Json<RewardTerms>;
}

export interface EngineAllocationRow {
  id: string;
  reward_id: string;
  supply: number;
  distributed: Generated<number>;
  first_code_index: number | null;
  /** The allocation stream's revision as the engine last wrote or read it (bigint, read as a string); null: no stream yet. */
  revision: string | null;
}

export interface EngineProgressRow {
  user_id: string;
  challenge_id: string;
  state: Json<ChallengeProgress>;
}

export interface EngineMemberRow {
  user_id: string;
  community_id: string;
  streak: Json<StreakState>;
  last_active_at: ColumnType<Date, string, string>;
}

export interface EngineLeaderboardRow {
  id: string;
  community_id: string | null;
  rewards: Json<RankDistribution[]>;
}

/** A user's entries into a giveaway: what the draw reads (see `reads.ts`). */
export interface EngineRewardEntryRow {
  reward_id: string;
  user_id: string;
  entries: number;
}

export const engineMigrations: Record<string, Migration> = {
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
};

export type EngineDb = Kysely<EngineState>;

/** Rows a statement may carry: PostgreSQL takes at most 65,535 parameters, and a row here has at most six. */
const ROWS_PER_STATEMENT = 5000;

function chunks<T>(items: readonly T[], size = ROWS_PER_STATEMENT): T[][] {
  const result: T[][] = [];
  for (let start = 0; start < items.length; start += size) result.push(items.slice(start, start + size));
  return result;
}

export const pairKey = (a: string, b: string) => `${a} ${b}`;

/** Distinct pairs, in first-seen order. */
export function uniquePairs(pairs: [string, string][]): [string, string][] {
  return [...new Map(pairs.map((pair) => [pairKey(...pair), pair])).values()];
}

/** Rows whose (a, b) pair is one of these. */
function pairIn(a: string, b: string, pairs: [string, string][]) {
  return sql<boolean>`(${sql.ref(a)}, ${sql.ref(b)}) in (${sql.join(pairs.map(([x, y]) => sql`(${x}, ${y})`))})`;
}

// --- Challenges ---------------------------------------------------------------------------------------

export async function loadChallenge(db: EngineDb, challengeId: string): Promise<ChallengeRecord | undefined> {
  return (await db.selectFrom('engine_challenges').select('record').where('id', '=', challengeId).executeTakeFirst())?.record;
}

export async function saveChallenge(db: EngineDb, record: ChallengeRecord): Promise<void> {
  await db
    .insertInto('engine_challenges')
    .values({ id: record.challengeId, community_id: record.communityId, record: JSON.stringify(record) })
    .onConflict((oc) => oc.column('id').doUpdateSet({ record: JSON.stringify(record) }))
    .execute();
}

/** The challenges of these communities (by id within each), in one query. */
export async function loadCommunityChallenges(db: EngineDb, communityIds: readonly string[]): Promise<Map<string, ChallengeRecord[]>> {
  const byCommunity = new Map<string, ChallengeRecord[]>(communityIds.map((id) => [id, []]));
  if (communityIds.length === 0) return byCommunity;
  const rows = await db
    .selectFrom('engine_challenges')
    .select(['community_id', 'record'])
    .where('community_id', 'in', [...byCommunity.keys()])
    .orderBy('community_id')
    .orderBy('id')
    .execute();
  for (const row of rows) byCommunity.get(row.community_id)!.push(row.record);
  return byCommunity;
}

// --- Rewards and allocations --------------------------------------------------------------------------

/** Allocations named by a distribution are known to the engine even when no reward allocation created them. */
export async function registerAllocations(db: EngineDb, entries: Pick<DistributionEntry, 'rewardsConfig'>[]): Promise<void> {
  const rows = entries.flatMap((entry) => entry.rewardsConfig.allocations.map((a) => ({ id: a.id, reward_id: a.rewardId, supply: a.supply })));
  for (const chunk of chunks(rows)) {
    await db
      .insertInto('engine_allocations')
      .values(chunk)
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
  }
}

/** An allocation the engine can hand out from, with its reward's terms. */
export interface AllocationRow {
  id: string;
  reward_id: string;
  supply: number;
  distributed: number;
  first_code_index: number | null;
  revision: string | null;
  kind: RewardKind;
  draws_at: string | null;
  organisation_id: string;
  community_id: string;
  terms: RewardTerms;
}

/** The allocations with these ids whose reward the engine knows, keyed by id, in one query. */
export async function loadAllocations(db: EngineDb, ids: string[]): Promise<Map<string, AllocationRow>> {
  if (ids.length === 0) return new Map();
  const rows = await db
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
    .execute();
  return new Map(rows.map((row) => [row.id, row]));
}

/**
 * The allocations of one organisation's rewards: allocation ids are chosen by clients, so a distribution
 * of one organisation may name an id another's distribution named first (whose reward the row keeps).
 * Such an allocation pays nothing to the second organisation.
 */
export function ownedBy<Row extends { organisation_id: string }>(rows: Map<string, Row>, organisationId: string): Map<string, Row> {
  return new Map([...rows].filter(([, row]) => row.organisation_id === organisationId));
}

/** The allocations as the domain decides on them. */
export function supplies(rows: Map<string, AllocationRow>): Map<string, AllocationSupply> {
  return new Map(
    [...rows.values()].map((row) => [
      row.id,
      { allocationId: row.id, rewardId: row.reward_id, rewardKind: row.kind, supply: row.supply, distributed: row.distributed, drawsAt: row.draws_at },
    ]),
  );
}

export async function loadRewardTerms(db: EngineDb, rewardId: string): Promise<RewardTerms | undefined> {
  return (await db.selectFrom('engine_rewards').select('terms').where('id', '=', rewardId).executeTakeFirst())?.terms;
}

/**
 * What appended hand-outs leave: each allocation's new `distributed` and stream revision, and the users'
 * giveaway entries added, in one statement each. The allocations exist (they were loaded in this
 * transaction), so the upsert only ever updates.
 */
export async function recordHandOuts(
  db: EngineDb,
  allocations: { row: AllocationRow; amount: number; revision: bigint }[],
  entries: EngineRewardEntryRow[],
): Promise<void> {
  for (const chunk of chunks(allocations)) {
    await db
      .insertInto('engine_allocations')
      .values(
        chunk.map(({ row, amount, revision }) => ({
          id: row.id,
          reward_id: row.reward_id,
          supply: row.supply,
          distributed: amount,
          first_code_index: row.first_code_index,
          revision: revision.toString(),
        })),
      )
      .onConflict((oc) =>
        oc.column('id').doUpdateSet({
          distributed: sql`engine_allocations.distributed + excluded.distributed`,
          revision: (eb) => eb.ref('excluded.revision'),
        }),
      )
      .execute();
  }
  for (const chunk of chunks(entries)) {
    await db
      .insertInto('engine_reward_entries')
      .values(chunk)
      .onConflict((oc) => oc.columns(['reward_id', 'user_id']).doUpdateSet({ entries: sql`engine_reward_entries.entries + excluded.entries` }))
      .execute();
  }
}

// --- Users --------------------------------------------------------------------------------------------

export interface Member {
  streak: StreakState;
  /** ISO string. */
  lastActiveAt: string;
}

/**
 * The challenges of these communities and the members of these pairs, in one query (a round trip of every
 * batch of custom events fewer than reading them apart); apart when the pairs need more than one statement.
 */
export async function loadChallengesAndMembers(
  db: EngineDb,
  communityIds: readonly string[],
  pairs: [string, string][],
): Promise<{ challenges: Map<string, ChallengeRecord[]>; members: Map<string, Member> }> {
  if (communityIds.length === 0 || pairs.length === 0 || pairs.length > ROWS_PER_STATEMENT) {
    return { challenges: await loadCommunityChallenges(db, communityIds), members: await loadMembers(db, pairs) };
  }
  const challenges = new Map<string, ChallengeRecord[]>(communityIds.map((id) => [id, []]));
  const row = await db
    .selectNoFrom((eb) => [
      eb
        .selectFrom('engine_challenges')
        .select(sql<[string, ChallengeRecord][]>`coalesce(json_agg(json_build_array(community_id, record) order by community_id, id), '[]')`.as('list'))
        .where('community_id', 'in', [...challenges.keys()])
        .as('challenges'),
      eb
        .selectFrom('engine_members')
        .select(
          sql<[string, string, StreakState, string][]>`coalesce(json_agg(json_build_array(user_id, community_id, streak, last_active_at)), '[]')`.as('list'),
        )
        .where(pairIn('user_id', 'community_id', pairs))
        .as('members'),
    ])
    .executeTakeFirstOrThrow();
  for (const [communityId, record] of row.challenges ?? []) challenges.get(communityId)!.push(record);
  const members = new Map<string, Member>();
  for (const [userId, communityId, streak, lastActiveAt] of row.members ?? []) {
    members.set(pairKey(userId, communityId), { streak, lastActiveAt: new Date(lastActiveAt).toISOString() });
  }
  return { challenges, members };
}

const MEMBER_COLUMNS = { user_id: 'text', community_id: 'text', streak: 'jsonb', last_active_at: 'timestamptz' } as const;

/** Members by (user, community) pair key, in one query a chunk. */
export async function loadMembers(db: EngineDb, pairs: [string, string][]): Promise<Map<string, Member>> {
  const members = new Map<string, Member>();
  for (const chunk of chunks(pairs)) {
    const rows = await db
      .selectFrom('engine_members')
      .select(['user_id', 'community_id', 'streak', 'last_active_at'])
      .where(pairIn('user_id', 'community_id', chunk))
      .execute();
    for (const row of rows) {
      members.set(pairKey(row.user_id, row.community_id), { streak: row.streak, lastActiveAt: new Date(row.last_active_at).toISOString() });
    }
  }
  return members;
}

export async function saveMembers(db: EngineDb, members: { userId: string; communityId: string; member: Member }[]): Promise<void> {
  if (members.length === 0) return;
  // One parameter per column whatever the count (`unnestRows`): a short statement of one text per shape, where
  // a row of parameters each made a statement of its own for every count of members.
  const rows = unnestRows(
    members.map(({ userId, communityId, member }) => ({
      user_id: userId,
      community_id: communityId,
      streak: member.streak,
      last_active_at: member.lastActiveAt,
    })),
    MEMBER_COLUMNS,
  );
  await db
    .insertInto('engine_members')
    .columns(rows.columns)
    .expression(rows.select)
    .onConflict((oc) =>
      oc
        .columns(['user_id', 'community_id'])
        .doUpdateSet({ streak: (eb) => eb.ref('excluded.streak'), last_active_at: (eb) => eb.ref('excluded.last_active_at') }),
    )
    .execute();
}

/**
 * Where each of these users was last active (ties by community id), in one query: a leaderboard without a
 * community pays out there.
 */
export async function lastActiveCommunities(db: EngineDb, userIds: string[]): Promise<Map<string, string>> {
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
  return new Map(rows.map((row) => [row.user_id, row.community_id]));
}

/** Progress by (user, challenge) pair key, in one query a chunk. */
export async function loadProgress(db: EngineDb, pairs: [string, string][]): Promise<Map<string, ChallengeProgress>> {
  const progress = new Map<string, ChallengeProgress>();
  for (const chunk of chunks(pairs)) {
    const rows = await db
      .selectFrom('engine_progress')
      .select(['user_id', 'challenge_id', 'state'])
      .where(pairIn('user_id', 'challenge_id', chunk))
      .execute();
    for (const row of rows) progress.set(pairKey(row.user_id, row.challenge_id), row.state);
  }
  return progress;
}

export async function saveProgress(db: EngineDb, progress: { userId: string; challengeId: string; state: ChallengeProgress }[]): Promise<void> {
  for (const chunk of chunks(progress)) {
    await db
      .insertInto('engine_progress')
      .values(chunk.map(({ userId, challengeId, state }) => ({ user_id: userId, challenge_id: challengeId, state: JSON.stringify(state) })))
      .onConflict((oc) => oc.columns(['user_id', 'challenge_id']).doUpdateSet({ state: (eb) => eb.ref('excluded.state') }))
      .execute();
  }
}

// --- Leaderboards -------------------------------------------------------------------------------------

export async function loadLeaderboard(db: EngineDb, leaderboardId: string): Promise<{ communityId: string | null; rewards: RankDistribution[] } | undefined> {
  const row = await db.selectFrom('engine_leaderboards').select(['community_id', 'rewards']).where('id', '=', leaderboardId).executeTakeFirst();
  return row && { communityId: row.community_id, rewards: row.rewards };
}
