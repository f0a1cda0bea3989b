import { leaderboardsProjection } from './leaderboards.ts';
import { organisationsProjection } from './organisations.ts';
import type { Projection } from './projection.ts';

/** Every read model the service keeps. */
export const projections: readonly Projection[] = [organisationsProjection, leaderboardsProjection];
