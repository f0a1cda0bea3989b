import { Router } from 'express';
import { sql, type Kysely } from 'kysely';
import { DateTime } from 'luxon';
import type { ServiceContext } from '../api/context.ts';
import type { FrozenStanding } from '../domain/engagement-events.ts';
import type { Period } from '../domain/leaderboard.ts';
import { leaderboardWindowAt, previousWindow, type Window, type WindowedLeaderboard } from '../domain/windows.ts';
import { tenantOf } from '../infra/auth.ts';
import { standingsQuery, standingsSchema, type Standings } from '../api/contract/standings.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { badRequest, notFound } from '../infra/http/errors.ts';
import { parse } from '../api/routes.ts';
import { minPositionHeader, readYourWrites } from './read-your-writes.ts';
import { inOneSnapshot } from './analytics-days.ts';
import { requireUser, signedInUserOf } from '../infra/require-user.ts';
import { userTokenKey } from '../infra/user-tokens.ts';
import { STANDINGS_PROJECTION, type LeaderboardStandingsTables } from '../projectors/leaderboard-standings.ts';
import { withTableTypes } from '../infra/database.ts';

/**
 * The columns read here of tables other read models own (`leaderboards`, `organisations`, `users`: the
 * leaderboards, organisations and users projections), declared locally until those are typed.
 */
interface ReadTables {
  leaderboards: { id: string; organisation_id: string; metric_type: string; period: Period; starts_at: Date; expires_at: Date | null };
  organisations: { id: string; timezone: string };
  users: { id: string; organisation_id: string; username: string | null; display_name: string | null; profile_picture_url: string | null };
}

type StandingsDb = Kysely<LeaderboardStandingsTables & ReadTables>;

/** Every ranked user of a live window, rank 1 first (what a window close freezes). */
export async function rankedStandings(db: StandingsDb, leaderboardId: string, windowStart: string): Promise<FrozenStanding[]> {
  const rows = await liveRanking(db, leaderboardId, windowStart).execute();
  return rows.map((row, index) => ({ rank: index + 1, userId: row.user_id, score: row.score, reachedAt: row.reached_at.toISOString() }));
}

/** The ranking order of DESIGN §6: score, then who got there first, then user id; zero scores are not ranked. */
function liveRanking(db: StandingsDb, leaderboardId: string, windowStart: string) {
  return db
    .selectFrom('leaderboard_scores')
    .select(['user_id', 'score', 'reached_at'])
    .where('leaderboard_id', '=', leaderboardId)
    .where('window_start', '=', new Date(windowStart))
    .where('score', '>', 0)
    .orderBy('score', 'desc')
    .orderBy('reached_at')
    .orderBy('user_id');
}

/** The window to show: `current` is the last one once the leaderboard has expired, the first before it starts. */
function resolveWindow(leaderboard: WindowedLeaderboard, timeZone: string, wanted: string, now: Date): Window | null {
  const at = (instant: string) => leaderboardWindowAt(leaderboard, timeZone, instant);
  const current = () => {
    const time = now.getTime();
    if (time < Date.parse(leaderboard.startsAt)) return at(leaderboard.startsAt);
    if (leaderboard.expiresAt !== null && time >= Date.parse(leaderboard.expiresAt)) return at(new Date(Date.parse(leaderboard.expiresAt) - 1).toISOString());
    return at(now.toISOString());
  };
  if (wanted === 'current') return current();
  if (wanted === 'previous') {
    const window = current();
    return window ? previousWindow(leaderboard, timeZone, window) : null;
  }
  if (/^\d{4}-\d{2}-\d{2}$/.test(wanted)) {
    const local = DateTime.fromISO(wanted, { zone: timeZone });
    if (!local.isValid) throw badRequest([{ message: `window: ${wanted} is not a date` }]);
    return at(local.toUTC().toISO());
  }
  return at(new Date(wanted).toISOString());
}

export function standingsQueries(ctx: ServiceContext, integration: ApiDescription): Router {
  const router = Router();
  const db: StandingsDb = withTableTypes(ctx.database.db);
  const fresh = readYourWrites(db, [STANDINGS_PROJECTION], ctx.config.readYourWritesTimeoutMs);
  const signedIn = requireUser(userTokenKey(ctx.config));

  integration.route(
    router,
    {
      method: 'get',
      path: '/leaderboards/:leaderboardId/standings',
      operationId: 'getLeaderboardStandings',
      tag: 'Leaderboards',
      summary: 'A leaderboard’s standings in one window, ranked',
      description: [
        'Ranked by score (descending), then the earliest time the score was reached, then user id; users with a zero score are not ranked, and ranks are unique.',
        'Windows are half-open `[start, end)` in the organisation’s timezone. Once a window is closed (after the settlement delay), its frozen standings are served: those are the ones rank rewards were paid on.',
        'With `Authorization: Bearer <user token>`, `me` is the signed-in user’s own standing even when it is not on the page.',
      ].join('\n\n'),
      query: standingsQuery,
      headers: [{ name: 'Authorization', description: 'Optional `Bearer <user token>`: adds `me`; invalid or expired → 401' }, minPositionHeader],
      responses: {
        200: { description: 'One page of the standings', schema: standingsSchema },
      },
    },
    fresh,
    (req, res, next) => (req.get('authorization') ? signedIn(req, res, next) : next()),
    async (req, res) => {
      const { limit, skip, window: wanted } = parse(standingsQuery, req.query);
      const { organisationId } = tenantOf(res);
      const leaderboardId = String(req.params.leaderboardId).toLowerCase();
      // One snapshot for the leaderboard, its window's state, the page, its total, the caller's own standing and
      // the profiles: read apart while scores moved, a rank could contradict the page beside it.
      const body = await inOneSnapshot(db, async (snapshot) => {
        const row = await snapshot
          .selectFrom('leaderboards as l')
          .innerJoin('organisations as o', 'o.id', 'l.organisation_id')
          .select(['l.id', 'l.metric_type', 'l.period', 'l.starts_at', 'l.expires_at', 'o.timezone'])
          .where('l.organisation_id', '=', organisationId)
          .where('l.id', '=', leaderboardId)
          .executeTakeFirst();
        if (!row) throw notFound('Leaderboard not found');
        const leaderboard: WindowedLeaderboard = {
          period: row.period,
          startsAt: row.starts_at.toISOString(),
          expiresAt: row.expires_at ? row.expires_at.toISOString() : null,
        };
        const now = ctx.clock.now();
        const window = resolveWindow(leaderboard, row.timezone, wanted, now);
        if (!window) throw notFound(`The leaderboard has no ${wanted === 'previous' ? 'previous window' : `window at ${wanted}`}`);
        const closed = await snapshot
          .selectFrom('leaderboard_closed_windows')
          .select('closed_at')
          .where('leaderboard_id', '=', leaderboardId)
          .where('window_start', '=', new Date(window.start))
          .executeTakeFirst();
        const userId = res.locals.user ? signedInUserOf(res).userId : null;
        const { totalCount, edges, me } = closed
          ? await frozenPage(snapshot, leaderboardId, window.start, { limit, skip }, userId)
          : await livePage(snapshot, leaderboardId, window.start, { limit, skip }, userId);
        const status = closed
          ? 'closed'
          : Date.parse(window.start) > now.getTime()
            ? 'upcoming'
            : window.end !== null && Date.parse(window.end) <= now.getTime()
              ? 'settling'
              : 'open';
        return {
          leaderboardId,
          metricType: row.metric_type,
          period: row.period,
          window: { start: window.start, end: window.end, status },
          ...(await withProfiles(snapshot, organisationId, edges, me)),
          totalCount,
        } satisfies Standings;
      });
      res.json(body);
    },
  );

  return router;
}

interface Ranked {
  rank: number;
  userId: string;
  score: number;
  reachedAt: string;
}

interface RankedPage {
  totalCount: number;
  edges: Ranked[];
  me: Ranked | null;
}

async function livePage(
  db: StandingsDb,
  leaderboardId: string,
  windowStart: string,
  page: { limit: number; skip: number },
  userId: string | null,
): Promise<RankedPage> {
  const [rows, count, mine] = await Promise.all([
    liveRanking(db, leaderboardId, windowStart).limit(page.limit).offset(page.skip).execute(),
    db
      .selectFrom('leaderboard_scores')
      .select((eb) => eb.fn.countAll<string>().as('count'))
      .where('leaderboard_id', '=', leaderboardId)
      .where('window_start', '=', new Date(windowStart))
      .where('score', '>', 0)
      .executeTakeFirstOrThrow(),
    userId
      ? db
          .selectFrom('leaderboard_scores')
          .select(['user_id', 'score', 'reached_at'])
          .where('leaderboard_id', '=', leaderboardId)
          .where('window_start', '=', new Date(windowStart))
          .where('user_id', '=', userId)
          .where('score', '>', 0)
          .executeTakeFirst()
      : Promise.resolve(undefined),
  ]);
  let me: Ranked | null = null;
  if (mine) {
    // Everyone ranked ahead: a higher score, or the same score reached earlier, or the same both and a lower id.
    const ahead = await db
      .selectFrom('leaderboard_scores')
      .select((eb) => eb.fn.countAll<string>().as('count'))
      .where('leaderboard_id', '=', leaderboardId)
      .where('window_start', '=', new Date(windowStart))
      .where(
        sql<boolean>`(score > ${mine.score} or (score = ${mine.score} and (reached_at, user_id) < (${mine.reached_at.toISOString()}::timestamptz, ${mine.user_id})))`,
      )
      .executeTakeFirstOrThrow();
    me = { rank: Number(ahead.count) + 1, userId: mine.user_id, score: mine.score, reachedAt: mine.reached_at.toISOString() };
  }
  return {
    totalCount: Number(count.count),
    edges: rows.map((row, index) => ({ rank: page.skip + index + 1, userId: row.user_id, score: row.score, reachedAt: row.reached_at.toISOString() })),
    me,
  };
}

async function frozenPage(
  db: StandingsDb,
  leaderboardId: string,
  windowStart: string,
  page: { limit: number; skip: number },
  userId: string | null,
): Promise<RankedPage> {
  const frozen = db.selectFrom('leaderboard_frozen_standings').where('leaderboard_id', '=', leaderboardId).where('window_start', '=', new Date(windowStart));
  const [rows, count, mine] = await Promise.all([
    frozen.select(['rank', 'user_id', 'score', 'reached_at']).orderBy('rank').limit(page.limit).offset(page.skip).execute(),
    frozen.select((eb) => eb.fn.countAll<string>().as('count')).executeTakeFirstOrThrow(),
    userId ? frozen.select(['rank', 'user_id', 'score', 'reached_at']).where('user_id', '=', userId).executeTakeFirst() : Promise.resolve(undefined),
  ]);
  const ranked = (row: { rank: number; user_id: string; score: number; reached_at: Date }): Ranked => ({
    rank: row.rank,
    userId: row.user_id,
    score: row.score,
    reachedAt: row.reached_at.toISOString(),
  });
  return { totalCount: Number(count.count), edges: rows.map(ranked), me: mine ? ranked(mine) : null };
}

/** Names and pictures for the page (and `me`) in one query. */
async function withProfiles(db: StandingsDb, organisationId: string, edges: Ranked[], me: Ranked | null) {
  const ids = [...new Set([...edges, ...(me ? [me] : [])].map((standing) => standing.userId))];
  const profiles =
    ids.length === 0
      ? []
      : await db
          .selectFrom('users')
          .select(['id', 'username', 'display_name', 'profile_picture_url'])
          .where('organisation_id', '=', organisationId)
          .where('id', 'in', ids)
          .execute();
  const byId = new Map(profiles.map((profile) => [profile.id, profile]));
  const withProfile = (standing: Ranked) => {
    const profile = byId.get(standing.userId);
    return {
      ...standing,
      username: profile?.username ?? null,
      displayName: profile?.display_name ?? null,
      profilePictureUrl: profile?.profile_picture_url ?? null,
    };
  };
  return { edges: edges.map(withProfile), me: me ? withProfile(me) : null };
}
