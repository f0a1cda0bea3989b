import { Router } from 'express';
import type { Kysely, Selectable } from 'kysely';
import type { ServiceContext } from '../api/context.ts';
import { tenantOf } from '../infra/auth.ts';
import { pageOf } from '../api/contract/common.ts';
import { eventRecordSchema, eventsQuery, type EventRecord } from '../api/contract/event-records.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { newestFirstDeep, type DeepList } from '../infra/http/deep-pages.ts';
import { notFound } from '../infra/http/errors.ts';
import type { Page } from '../infra/http/pagination.ts';
import { parse } from '../api/routes.ts';
import { minPositionHeader, readYourWrites } from './read-your-writes.ts';
import { ID_PATTERN } from '../infra/ids.ts';
import type { CommunityTables } from '../projectors/communities.ts';
import type { CustomEventRow, CustomEventTables, EventCountDimension } from '../projectors/custom-events.ts';
import type { UserTables } from '../projectors/users.ts';
import { iso } from './communities.ts';
import { withTableTypes } from '../infra/database.ts';

/** `GET /integration/events`: the organisation's logged custom events as the contract's event records. */
export function eventQueries(ctx: ServiceContext, integration: ApiDescription): Router {
  const router = Router();
  const db: Kysely<CustomEventTables> = withTableTypes(ctx.database.db);
  const users: Kysely<UserTables> = withTableTypes(ctx.database.db);
  const communities: Kysely<CommunityTables> = withTableTypes(ctx.database.db);
  const fresh = readYourWrites(ctx.database.db, ['custom_events', 'users', 'communities'], ctx.config.readYourWritesTimeoutMs);

  integration.route(
    router,
    {
      method: 'get',
      path: '/events',
      operationId: 'listCustomEvents',
      tag: 'Events',
      summary: "The organisation's logged custom events, newest first",
      description: [
        'Every custom event the organisation logged (`POST /admin/events/custom`, or a user redeeming a custom event link), newest first (`createdAt`, then `id`, both descending). The API token is enough: no user token is needed.',
        'Filters combine (AND): `userId` (platform or external id), `communityId`, `name` (the event name) and the half-open range `from` <= `createdAt` < `to`. An unknown `userId` or `communityId` is a 404; `from` after `to` is a 400.',
      ].join('\n\n'),
      query: eventsQuery,
      headers: [minPositionHeader],
      responses: { 200: { description: 'A page of event records', schema: pageOf(eventRecordSchema) } },
    },
    fresh,
    async (req, res) => {
      const { limit, skip, ...wanted } = parse(eventsQuery, req.query);
      const { organisationId } = tenantOf(res);
      const filters: EventFilters = { ...wanted, userId: wanted.userId === undefined ? undefined : await platformUserId(users, organisationId, wanted.userId) };
      if (filters.communityId !== undefined) await requireCommunity(communities, organisationId, filters.communityId);
      const { rows, totalCount } = await newestFirstDeep(db, eventList(organisationId, filters), { limit, skip });
      const page: Page<EventRecord> = { totalCount, edges: rows.map(eventRecordOf) };
      res.json(page);
    },
  );

  return router;
}

interface EventFilters {
  /** The platform id. */
  userId?: string;
  communityId?: string;
  name?: string;
  from?: string;
  to?: string;
}

/** The organisation's events matching every filter; counted by the read model's counter when one list is asked for. */
function eventList(organisationId: string, filters: EventFilters): DeepList<CustomEventTables, 'custom_events'> {
  const { userId, communityId, name, from, to } = filters;
  const candidates: [EventCountDimension, string | undefined][] = [
    ['user', userId],
    ['community', communityId],
    ['name', name],
  ];
  const given = candidates.flatMap(([dimension, value]): [EventCountDimension, string][] => (value === undefined ? [] : [[dimension, value]]));
  const [dimension, value] = given[0] ?? ['all', ''];
  return {
    table: 'custom_events',
    filter: (rows) => {
      let matching = rows.where('organisation_id', '=', organisationId);
      if (userId !== undefined) matching = matching.where('user_id', '=', userId);
      if (communityId !== undefined) matching = matching.where('community_id', '=', communityId);
      if (name !== undefined) matching = matching.where('name', '=', name);
      if (from !== undefined) matching = matching.where('created_at', '>=', new Date(from));
      if (to !== undefined) matching = matching.where('created_at', '<', new Date(to));
      return matching;
    },
    counted:
      given.length > 1 || from !== undefined || to !== undefined
        ? undefined
        : async (db) => {
            const row = await db
              .selectFrom('custom_event_counts')
              .select('count')
              .where('organisation_id', '=', organisationId)
              .where('dimension', '=', dimension)
              .where('value', '=', value)
              .executeTakeFirst();
            return Number(row?.count ?? 0);
          },
  };
}

function eventRecordOf(row: Selectable<CustomEventRow>): EventRecord {
  const { name: _shadowed, ...payload } = row.payload;
  return {
    id: row.id,
    nonce: row.nonce,
    createdAt: iso(row.created_at),
    organisationId: row.organisation_id,
    communityId: row.community_id,
    userId: row.user_id,
    eventSourceId: row.event_source_id,
    payload: { name: row.name, ...payload },
    tags: row.tags,
  };
}

/** The platform id of the organisation's user known by this platform id, else by this external id; 404 when neither. */
async function platformUserId(db: Kysely<UserTables>, organisationId: string, userId: string): Promise<string> {
  const known = (id: 'id' | 'external_user_id', value: string) =>
    db.selectFrom('users').select('id').where('organisation_id', '=', organisationId).where(id, '=', value).executeTakeFirst();
  const user = (ID_PATTERN.test(userId) ? await known('id', userId.toLowerCase()) : undefined) ?? (await known('external_user_id', userId));
  if (!user) throw notFound('User not found');
  return user.id;
}

/** Filtering by a community the organisation does not have is a 404, as on `GET /admin/teams`. */
export async function requireCommunity(db: Kysely<CommunityTables>, organisationId: string, communityId: string): Promise<void> {
  const known = await db.selectFrom('communities').select('id').where('organisation_id', '=', organisationId).where('id', '=', communityId).executeTakeFirst();
  if (!known) throw notFound('Community not found');
}
