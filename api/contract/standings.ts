import { z } from 'zod';
import { pagination } from '../../infra/http/pagination.ts';
import { DATE_RANGE_MESSAGE, isoDate, isoDateTime, withinDateRange } from './common.ts';

export const standingsQuery = pagination.extend({
  window: z
    .union([z.enum(['current', 'previous']), isoDate, isoDateTime], {
      error: 'must be current, previous, a date (YYYY-MM-DD, in the organisation’s timezone) or an ISO 8601 date-time',
    })
    .refine((window) => window === 'current' || window === 'previous' || withinDateRange(window), DATE_RANGE_MESSAGE)
    .default('current')
    .describe('current (default), previous, or the window containing a date (local to the organisation) or an instant'),
});

const standing = z
  .object({
    rank: z.number().int().min(1),
    userId: z.string(),
    username: z.string().nullable(),
    displayName: z.string().nullable(),
    profilePictureUrl: z.string().nullable(),
    score: z.number(),
    reachedAt: z.string().describe('when the user reached this score (the first tie-break: earlier ranks higher)'),
  })
  .meta({ id: 'Standing' });

export const standingsSchema = z
  .object({
    leaderboardId: z.string(),
    metricType: z.string(),
    period: z.string(),
    window: z.object({
      start: z.string(),
      end: z.string().nullable(),
      status: z
        .enum(['upcoming', 'open', 'settling', 'closed'])
        .describe('closed: frozen standings, rank rewards paid; settling: ended, late events may still count'),
    }),
    totalCount: z.number().int().min(0),
    edges: z.array(standing),
    me: standing.nullable().describe('the signed-in user’s own standing (with a user token), even outside the page; null when unranked or no user token'),
  })
  .meta({ id: 'LeaderboardStandings' });

export type Standings = z.infer<typeof standingsSchema>;
