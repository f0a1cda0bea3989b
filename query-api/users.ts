import { Router } from 'express';
import { sql, type Kysely, type Selectable } from 'kysely';
import { teamMember, type CommunityLedger, type TeamMember } from '../domain/user.ts';
import type { ServiceContext } from '../api/context.ts';
import { tenantOf } from '../infra/auth.ts';
import { pageOf } from '../api/contract/common.ts';
import { listUsersQuery, teamMemberSchema } from '../api/contract/users.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { notFound } from '../infra/http/errors.ts';
import { newestFirst, type Page, type Pagination } from '../infra/http/pagination.ts';
import { parse } from '../api/routes.ts';
import { readYourWrites } from './read-your-writes.ts';
import type { UserRow, UserTables } from '../projectors/users.ts';
import type { AchievementTables } from '../projectors/achievements.ts';
import type { UserLedgerTables } from '../projectors/user-ledgers.ts';
import { withTableTypes } from '../infra/database.ts';
import { iso } from './communities.ts';
import { achievementCountsOf, addAchievementOnlyLedgers } from './achievements.ts';
import { minPositionHeader } from './read-your-writes.ts';

/** What a team member record is read from: the user and its ledgers. */
export type TeamMemberTables = UserTables & UserLedgerTables;

export function userQueries(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();
  const db: Kysely<TeamMemberTables> = withTableTypes(ctx.database.db);
  const fresh = readYourWrites(db, ['users', 'user_ledgers', 'achievements'], ctx.config.readYourWritesTimeoutMs);

  admin.route(
    router,
    {
      method: 'get',
      path: '/users',
      operationId: 'listUsers',
      tag: 'Users',
      summary: "List the organisation's users (team member records), newest first; or find one by externalUserId",
      query: listUsersQuery,
      headers: [minPositionHeader],
      responses: { 200: { description: 'A page of team member records', schema: pageOf(teamMemberSchema) } },
    },
    fresh,
    async (req, res) => {
      const { limit, skip, externalUserId } = parse(listUsersQuery, req.query);
      const { organisationId } = tenantOf(res);
      res.json(await listTeamMembers(db, organisationId, { externalUserId }, { limit, skip }));
    },
  );

  admin.route(
    router,
    {
      method: 'get',
      path: '/users/:userId',
      operationId: 'getUser',
      tag: 'Users',
      summary: 'Read one user as a team member record',
      headers: [minPositionHeader],
      responses: { 200: { description: 'The team member record', schema: teamMemberSchema } },
    },
    fresh,
    async (req, res) => {
      const { organisationId } = tenantOf(res);
      const member = await findTeamMember(db, organisationId, String(req.params.userId).toLowerCase());
      if (!member) throw notFound('User not found');
      res.json(member);
    },
  );

  return router;
}

export interface TeamMemberFilters {
  externalUserId?: string;
  communityId?: string;
  role?: string;
  search?: string;
}

/** One organisation's team members matching every filter, newest first; two queries whatever the page size. */
export async function listTeamMembers(
  db: Kysely<TeamMemberTables>,
  organisationId: string,
  filters: TeamMemberFilters,
  page: Pagination,
): Promise<Page<TeamMember>> {
  let matching = db.selectFrom('users').where('organisation_id', '=', organisationId);
  if (filters.externalUserId !== undefined) matching = matching.where('external_user_id', '=', filters.externalUserId);
  if (filters.communityId !== undefined) matching = matching.where(sql<boolean>`community_ids @> array[${filters.communityId}]::text[]`);
  if (filters.role !== undefined) matching = matching.where(sql<boolean>`roles @> array[${filters.role}]::text[]`);
  if (filters.search !== undefined) {
    const prefix = `${escapeLike(filters.search.toLowerCase())}%`;
    matching = matching.where((eb) => eb.or([eb('username_key', 'like', prefix), eb('display_name_key', 'like', prefix), eb('email_key', 'like', prefix)]));
  }
  const { rows, totalCount } = await newestFirst(matching, page);
  const ledgers = await ledgersOf(
    db,
    rows.map((row) => row.id),
  );
  return { totalCount, edges: rows.map((row) => teamMemberFromRow(row, ledgers.get(row.id) ?? [])) };
}

/** The users' community ledgers, with their achievement counts: two queries for the whole page, by user id. */
async function ledgersOf(db: Kysely<TeamMemberTables>, userIds: string[]): Promise<Map<string, CommunityLedger[]>> {
  const byUser = new Map<string, CommunityLedger[]>();
  if (userIds.length === 0) return byUser;
  const [rows, achievements] = await Promise.all([
    db
      .selectFrom('user_ledgers')
      .select([
        'user_id',
        'community_id',
        'points',
        'xp_knowledge',
        'xp_creativity',
        'xp_loyalty',
        'xp_influence',
        'xp_participation',
        'xp_contribution',
        'challenges_completed',
        'current_streak',
        'longest_streak',
        'last_extended_at',
      ])
      .where('user_id', 'in', userIds)
      .orderBy('community_id')
      .execute(),
    // The counts are the achievements read model's table: the same connection, typed for it.
    achievementCountsOf(withTableTypes<AchievementTables>(db), userIds),
  ]);
  for (const row of rows) {
    const xp = {
      knowledge: row.xp_knowledge,
      creativity: row.xp_creativity,
      loyalty: row.xp_loyalty,
      influence: row.xp_influence,
      participation: row.xp_participation,
      contribution: row.xp_contribution,
    };
    const ledger: CommunityLedger = {
      communityId: row.community_id,
      points: row.points,
      xp: { total: Object.values(xp).reduce((sum, value) => sum + value, 0), ...xp },
      challengesCompleted: row.challenges_completed,
      achievementsCompleted: achievements.get(row.user_id)?.get(row.community_id) ?? 0,
      streak: {
        currentStreak: row.current_streak,
        longestStreak: row.longest_streak,
        lastExtendedAt: row.last_extended_at === null ? null : iso(row.last_extended_at),
      },
    };
    byUser.set(row.user_id, [...(byUser.get(row.user_id) ?? []), ledger]);
  }
  addAchievementOnlyLedgers(byUser, achievements);
  return byUser;
}

export async function findTeamMember(db: Kysely<TeamMemberTables>, organisationId: string, userId: string): Promise<TeamMember | null> {
  const row = await db.selectFrom('users').selectAll().where('organisation_id', '=', organisationId).where('id', '=', userId).executeTakeFirst();
  return row ? teamMemberFromRow(row, (await ledgersOf(db, [userId])).get(userId) ?? []) : null;
}

function teamMemberFromRow(row: Selectable<UserRow>, ledgers: CommunityLedger[]): TeamMember {
  return teamMember(
    {
      id: row.id,
      organisationId: row.organisation_id,
      externalUserId: row.external_user_id,
      username: row.username,
      displayName: row.display_name,
      email: row.email,
      emailVerifiedAt: row.email_verified_at === null ? null : iso(row.email_verified_at),
      fullName: row.full_name,
      parentEmail: row.parent_email,
      locale: row.locale,
      bio: row.bio,
      profilePictureUrl: row.profile_picture_url,
      roles: row.roles,
      isAnonymous: row.is_anonymous,
      birthDay: row.birth_day,
      birthMonth: row.birth_month,
      birthYear: row.birth_year,
      socialHandles: row.social_handles,
      communityIds: row.community_ids,
      createdAt: iso(row.created_at),
      updatedAt: iso(row.updated_at),
    },
    ledgers,
  );
}

function escapeLike(value: string): string {
  return value.replace(/[\\%_]/g, (character) => `\\${character}`);
}
