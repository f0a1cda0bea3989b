import { Router } from 'express';
import { sql, type AliasedSelectQueryBuilder, type Kysely, type Transaction } from 'kysely';
import type { ServiceContext } from '../api/context.ts';
import { fraction, ratio } from '../domain/analytics.ts';
import { pickDetails } from '../domain/localised-details.ts';
import { tenantOf } from '../infra/auth.ts';
import { RANGE_DESCRIPTION, giveawaysOverviewQuery, giveawaysOverviewSchema, type GiveawaysOverview } from '../api/contract/analytics.ts';
import { languageHeader } from '../api/contract/localised-details.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { parse } from '../api/routes.ts';
import { minPositionHeader, readYourWrites } from './read-your-writes.ts';
import { GIVEAWAY_ANALYTICS_PROJECTION, type GiveawayAnalyticsTables } from '../projectors/giveaway-analytics.ts';
import { withTableTypes } from '../infra/database.ts';
import {
  count,
  dayAfter,
  inOneSnapshot,
  localDays,
  organisationSettings,
  startOfDay,
  unbounded,
  wantedLanguage,
  withinDays,
  type Days,
  type OrganisationSettings,
  type OrganisationSettingsTables,
} from './analytics-days.ts';

type Query = ReturnType<typeof giveawaysOverviewQuery.parse>;

type Tables = GiveawayAnalyticsTables & OrganisationSettingsTables;

/** A participant's entries into a selected giveaway (all time, or summed over the range's days). */
interface UserEntries {
  reward_id: string;
  user_id: string;
  /** An integer column, or a sum of one (as the driver returns it: a string). */
  entries: number | string | bigint;
}

export function giveawayAnalyticsQueries(ctx: ServiceContext, analytics: ApiDescription): Router {
  const router = Router();
  const db: Kysely<Tables> = withTableTypes(ctx.database.db);

  analytics.route(
    router,
    {
      method: 'get',
      path: '/rewards/stats/giveaways/overview',
      operationId: 'getGiveawaysOverview',
      tag: 'Giveaways',
      summary: 'Giveaway analytics: summary, entries by source, participation funnel, daily time series, popular giveaways',
      description: [
        'Giveaways are entries rewards. `status` selects pending (not drawn yet), drawn or all of them.',
        `${RANGE_DESCRIPTION} The range selects the giveaways whose \`drawsAt\` falls on one of its days, and counts the entries handed out into them on its days (so the time series adds up to \`totalEntriesDistributed\`); the draws of the selected giveaways count whenever their entries were made.`,
        '**Rates.** `averageWinRate` and `percentage` are fractions in [0, 1] rounded to 4 decimals (not percents), 0 when there is nothing to divide by; `averageEntriesPerUser` is rounded to 4 decimals.',
      ].join('\n\n'),
      query: giveawaysOverviewQuery,
      headers: [languageHeader, minPositionHeader],
      responses: { 200: { description: 'The giveaways overview', schema: giveawaysOverviewSchema } },
    },
    readYourWrites(db, [GIVEAWAY_ANALYTICS_PROJECTION, 'organisations'], ctx.config.readYourWritesTimeoutMs),
    async (req, res) => {
      const query = parse(giveawaysOverviewQuery, req.query);
      const language = wantedLanguage(req);
      res.json(await giveawaysOverview(db, tenantOf(res).organisationId, query, language));
    },
  );

  return router;
}

export async function giveawaysOverview(db: Kysely<Tables>, organisationId: string, query: Query, language: string | undefined): Promise<GiveawaysOverview> {
  const settings = await organisationSettings(db, organisationId);
  const days = localDays(query, settings.timeZone);
  return inOneSnapshot(db, async (trx) => {
    const { selected, userEntries } = relations(trx, organisationId, query.status, days, settings);
    const selectedIds = selected.select('reward_id');
    const [giveaways, users, winners, popular, sources, series] = await Promise.all([
      selected
        .select((eb) => [
          eb.fn.countAll().as('total'),
          eb.fn.countAll().filterWhere('status', '=', 'pending').as('pending'),
          eb.fn.countAll().filterWhere('status', '=', 'drawn').as('drawn'),
          eb.fn.sum('winners').as('winners'),
          eb.fn.sum('entrants').filterWhere('status', '=', 'drawn').as('entrants'),
        ])
        .executeTakeFirstOrThrow(),
      trx
        .selectFrom(
          trx
            .selectFrom(userEntries)
            .select((eb) => ['user_id', eb.fn.sum('entries').as('entries')])
            .groupBy('user_id')
            .as('per_user'),
        )
        .select((eb) => [
          eb.fn.countAll().as('participants'),
          eb.fn.sum('entries').as('entries'),
          eb.fn.countAll().filterWhere('entries', '>=', 2).as('multiple'),
        ])
        .executeTakeFirstOrThrow(),
      trx
        .selectFrom('analytics_giveaway_participants')
        .select((eb) => eb.fn.count('user_id').distinct().as('winners'))
        .where('reward_id', 'in', selectedIds)
        .where('won', '=', true)
        .executeTakeFirstOrThrow(),
      selected
        .leftJoin(
          trx
            .selectFrom(userEntries)
            .select((eb) => ['reward_id', eb.fn.countAll().as('participants'), eb.fn.sum('entries').as('entries')])
            .groupBy('reward_id')
            .as('r'),
          'r.reward_id',
          'analytics_giveaways.reward_id',
        )
        .select(['analytics_giveaways.reward_id', 'details', 'draws_at', 'r.participants', 'r.entries'])
        .orderBy(sql`coalesce(r.participants, 0)`, 'desc')
        .orderBy(sql`coalesce(r.entries, 0)`, 'desc')
        .orderBy('draws_at')
        .orderBy('analytics_giveaways.reward_id')
        .limit(5)
        .execute(),
      withinDays(
        trx
          .selectFrom('analytics_giveaway_source_days')
          .select((eb) => ['source', eb.fn.sum('entries').as('entries')])
          .where('reward_id', 'in', selectedIds),
        days,
      )
        .groupBy('source')
        .orderBy('entries', 'desc')
        .orderBy('source')
        .execute(),
      withinDays(
        trx
          .selectFrom('analytics_giveaway_days')
          .select((eb) => [
            'day',
            eb.fn.sum('new_entries').as('entries'),
            eb.fn.sum('new_participants').as('participants'),
            eb.fn.sum('drawings').as('drawings'),
          ])
          .where('reward_id', 'in', selectedIds),
        days,
      )
        .groupBy('day')
        .orderBy('day')
        .execute(),
    ]);
    const totalEntries = count(users.entries);
    return {
      summary: {
        totalGiveaways: count(giveaways.total),
        activeGiveaways: count(giveaways.pending),
        completedGiveaways: count(giveaways.drawn),
        totalEntriesDistributed: totalEntries,
        uniqueParticipants: count(users.participants),
        totalWinners: count(giveaways.winners),
        averageEntriesPerUser: ratio(totalEntries, count(users.participants)),
        averageWinRate: fraction(count(giveaways.winners), count(giveaways.entrants)),
      },
      entryDistribution: sources.map((row) => ({ source: row.source, entries: count(row.entries), percentage: fraction(count(row.entries), totalEntries) })),
      participationFunnel: [
        { stage: 'participants', count: count(users.participants) },
        { stage: 'multiple entries', count: count(users.multiple) },
        { stage: 'winners', count: count(winners.winners) },
      ],
      timeseries: denseSeries(series),
      popularGiveaways: popular.map((row) => ({
        rewardId: row.reward_id,
        title: pickDetails(row.details, language, settings.defaultLanguage).title,
        drawDate: new Date(row.draws_at).toISOString(),
        participants: count(row.participants),
        totalEntries: count(row.entries),
      })),
    };
  });
}

/**
 * The selected giveaways (an index range on (organisation, [status,] draws_at)), and each of their
 * participants' entries in the range: the per-user totals when the range is unbounded, else summed from the
 * per-day rows of the range's days.
 */
function relations(trx: Transaction<Tables>, organisationId: string, status: Query['status'], days: Days, { timeZone }: OrganisationSettings) {
  let selected = trx.selectFrom('analytics_giveaways').where('organisation_id', '=', organisationId);
  if (status !== 'all') selected = selected.where('status', '=', status);
  if (days.from !== null) selected = selected.where('draws_at', '>=', new Date(startOfDay(days.from, timeZone)));
  if (days.to !== null) selected = selected.where('draws_at', '<', new Date(startOfDay(dayAfter(days.to), timeZone)));
  const selectedIds = selected.select('reward_id');
  const userEntries: AliasedSelectQueryBuilder<UserEntries, 'u'> = (
    unbounded(days)
      ? trx.selectFrom('analytics_giveaway_participants').select(['reward_id', 'user_id', 'entries']).where('reward_id', 'in', selectedIds)
      : withinDays(
          trx
            .selectFrom('analytics_giveaway_user_days')
            .select((eb) => ['reward_id', 'user_id', eb.fn.sum('entries').as('entries')])
            .where('reward_id', 'in', selectedIds),
          days,
        ).groupBy(['reward_id', 'user_id'])
  ).as('u');
  return { selected, userEntries };
}

/** Every day from the first to the last with activity, days without any as zeros. */
function denseSeries(rows: { day: string; entries: unknown; participants: unknown; drawings: unknown }[]): GiveawaysOverview['timeseries'] {
  const byDay = new Map(rows.map((row) => [row.day, row]));
  const series: GiveawaysOverview['timeseries'] = [];
  const first = rows[0]?.day;
  const last = rows.at(-1)?.day;
  for (let day = first; day !== undefined && last !== undefined && day <= last; day = dayAfter(day)) {
    const row = byDay.get(day);
    series.push({ date: day, newEntries: count(row?.entries), newParticipants: count(row?.participants), drawings: count(row?.drawings) });
  }
  return series;
}
