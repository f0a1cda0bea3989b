import { z } from 'zod';
import { DATE_RANGE_MESSAGE, EARLIEST_DATE, LATEST_DATE, hexId, isoDate, isoDateTime, withinDateRange } from './common.ts';

/**
 * The analytics family's query parameters and records (the contract's "Analytics records"). Rates and
 * percentages are fractions in [0, 1] rounded to 4 decimals; 0 when there is nothing to divide by.
 */

const localDay = z
  .union([isoDate, isoDateTime], { error: 'must be a date (YYYY-MM-DD) or an ISO 8601 date-time' })
  .refine(withinDateRange, DATE_RANGE_MESSAGE)
  .optional();

/** `from` and `to`: a range of whole local days, both ends included. */
export const dayRange = z.object({
  from: localDay.describe("first day of the range (inclusive): a date, or a date-time standing for its day in the organisation's time zone"),
  to: localDay.describe("last day of the range (inclusive): a date, or a date-time standing for its day in the organisation's time zone"),
});

export const RANGE_DESCRIPTION =
  "**Range.** `from` and `to` (both optional, both inclusive) select whole days in the organisation's time zone: a date `YYYY-MM-DD` is that local day, a date-time stands for the local day it falls on. " +
  `\`from\` after \`to\` is a 400, and so is a date outside ${EARLIEST_DATE} to ${LATEST_DATE}. Facts count on the local day they happened.`;

export const GIVEAWAY_STATUSES = ['pending', 'drawn', 'all'] as const;

export const giveawaysOverviewQuery = dayRange.extend({
  status: z.enum(GIVEAWAY_STATUSES).default('all').describe('pending: not drawn yet; drawn: drawn; all (default)'),
});

export const actionStepsQuery = dayRange.extend({
  challengeId: hexId.transform((value) => value.toLowerCase()).describe("one of the organisation's challenges (else 404)"),
});

const fractionOf = (what: string) => z.number().min(0).max(1).describe(`${what}: a fraction in [0, 1] rounded to 4 decimals (0 when undefined)`);

export const giveawaysOverviewSchema = z
  .object({
    summary: z.object({
      totalGiveaways: z.number().int().min(0).describe('giveaways selected (status, drawsAt in the range)'),
      activeGiveaways: z.number().int().min(0).describe('of those, not drawn yet (pending)'),
      completedGiveaways: z.number().int().min(0).describe('of those, drawn'),
      totalEntriesDistributed: z.number().int().min(0).describe('entries handed out into them, on days in the range'),
      uniqueParticipants: z.number().int().min(0).describe('distinct users with such entries'),
      totalWinners: z.number().int().min(0).describe('winners of the drawn ones (a user winning two giveaways counts twice)'),
      averageEntriesPerUser: z.number().min(0).describe('totalEntriesDistributed / uniqueParticipants, rounded to 4 decimals (0 without participants)'),
      averageWinRate: fractionOf('winners / entrants over the drawn giveaways (every entrant of each draw)'),
    }),
    entryDistribution: z
      .array(
        z.object({
          source: z.string().describe('the payout that handed the entries out: action, challenge or leaderboard'),
          entries: z.number().int().min(0),
          percentage: fractionOf('entries / totalEntriesDistributed'),
        }),
      )
      .describe('sources with entries, most entries first'),
    participationFunnel: z
      .array(z.object({ stage: z.string(), count: z.number().int().min(0) }))
      .describe(
        '`participants` (distinct users with entries), `multiple entries` (of those, users with at least 2 entries in all), `winners` (distinct users who won a drawn giveaway)',
      ),
    timeseries: z
      .array(
        z.object({
          date: z.string().describe("a local date (YYYY-MM-DD) in the organisation's time zone"),
          newEntries: z.number().int().min(0).describe('entries handed out that day'),
          newParticipants: z.number().int().min(0).describe('users whose first entry into a giveaway was that day (per giveaway: entering two counts twice)'),
          drawings: z.number().int().min(0).describe('giveaways drawn that day'),
        }),
      )
      .describe('every day from the first to the last day with activity (within the range), including days without any, oldest first'),
    popularGiveaways: z
      .array(
        z.object({
          rewardId: z.string(),
          title: z.string().describe('in the language of x-language, with fallbacks'),
          drawDate: z.string().describe('drawsAt'),
          participants: z.number().int().min(0),
          totalEntries: z.number().int().min(0),
        }),
      )
      .describe('the 5 selected giveaways with most participants (then most entries, earliest draw, id)'),
  })
  .meta({ id: 'GiveawaysOverview' });

export const actionStepSchema = z
  .object({
    actionId: z.string(),
    actionTitle: z.string().describe('in the language of x-language, with fallbacks'),
    actionKey: z.string(),
    category: z.string(),
    stepIndex: z.number().int().min(0).describe("the action's position in the challenge, from 0"),
    completionRate: fractionOf('users who completed this step / users who started the challenge'),
    totalCompletions: z.number().int().min(0).describe('completions of this step, repeats in later runs included'),
    dropOffRate: fractionOf('1 - totalCompletions of this step / totalCompletions of the step before (step 0: / runs started)'),
    criteriaMetCount: z.number().int().min(0).describe('attempts whose payload met the criteria'),
    criteriaNotMetCount: z.number().int().min(0).describe('attempts whose payload did not'),
    totalAttempts: z.number().int().min(0).describe('custom events matching the action key, whatever their outcome'),
    uniqueUsersCount: z.number().int().min(0).describe('distinct users who attempted this step'),
  })
  .meta({ id: 'ChallengeActionStep' });

export const actionStepsSchema = z.object({ steps: z.array(actionStepSchema) }).meta({ id: 'ChallengeActionSteps' });

export type GiveawaysOverview = z.infer<typeof giveawaysOverviewSchema>;
export type ActionStep = z.infer<typeof actionStepSchema>;
