import { communitiesProjection } from './communities.ts';
import { customEventLinksProjection } from './custom-event-links.ts';
import { customEventsProjection } from './custom-events.ts';
import { domainVerificationProcess } from '../process-managers/domain-verification.ts';
import { invitationsProjection } from './invitations.ts';
import { leaderboardsProjection } from './leaderboards.ts';
import { challengesProjection } from './challenges.ts';
import { gamesProjection } from './games.ts';
import { organisationsProjection } from './organisations.ts';
import { rewardAllocationsProjection } from './reward-allocations.ts';
import { rewardsProjection } from './rewards.ts';
import type { Consumer } from './runtime/consumer.ts';
import { usersProjection } from './users.ts';
import { variableConfigsProjection } from './variable-configs.ts';
import { engagementEngine } from '../process-managers/engagement-engine/index.ts';
import { engagementSchedule } from '../process-managers/engagement-schedule.ts';
import { leaderboardStandingsProjection } from './leaderboard-standings.ts';
import { userLedgersProjection } from './user-ledgers.ts';
import { giveawayAnalyticsProjection } from './giveaway-analytics.ts';
import { challengeStepAnalyticsProjection } from './challenge-step-analytics.ts';
import { rewardAssetsProjection } from './reward-assets.ts';
import { rewardEntriesProjection } from './reward-entries.ts';
import { achievementsProjection } from './achievements.ts';
import { webhooksProjection } from './webhooks.ts';
import { webhookDeliveries } from '../process-managers/webhook-deliveries.ts';

/** Every read model the service keeps. */
export const projections: readonly Consumer[] = [
  organisationsProjection,
  leaderboardsProjection,
  rewardsProjection,
  rewardAllocationsProjection,
  communitiesProjection,
  variableConfigsProjection,
  usersProjection,
  domainVerificationProcess,
  invitationsProjection,
  customEventsProjection,
  customEventLinksProjection,
  challengesProjection,
  gamesProjection,
  engagementEngine,
  engagementSchedule,
  leaderboardStandingsProjection,
  userLedgersProjection,
  giveawayAnalyticsProjection,
  challengeStepAnalyticsProjection,
  rewardAssetsProjection,
  rewardEntriesProjection,
  achievementsProjection,
  webhooksProjection,
  webhookDeliveries,
];
