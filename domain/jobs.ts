import type { LeaderboardStatus } from './leaderboard.ts';

/**
 * The jobs' messages: names and payloads, the contract between whoever schedules a job (a process manager,
 * a projector) and the command side's handler that runs it. Plain data, so both sides depend on it here.
 */

export const LEADERBOARD_STATUS_JOB = 'leaderboard-status';
export const WINDOW_CLOSE_JOB = 'leaderboard-window-close';
export const GIVEAWAY_DRAW_JOB = 'giveaway-draw';
export const LINK_EXPIRY_JOB = 'custom-event-link-expiry';

export interface LeaderboardStatusJob {
  leaderboardId: string;
  organisationId: string;
  from: LeaderboardStatus;
  to: LeaderboardStatus;
  /** startsAt or expiresAt as they were when scheduled: a job whose date has since changed does nothing. */
  at: string;
}

export interface WindowCloseJob {
  leaderboardId: string;
  organisationId: string;
  windowStart: string;
  windowEnd: string;
}

export interface GiveawayDrawJob {
  rewardId: string;
  organisationId: string;
  drawsAt: string;
}

export interface LinkExpiryJob {
  linkId: string;
  organisationId: string;
  expiresAt: string;
}

export const DOMAIN_VERIFICATION_JOB = 'domain-verification';

export interface DomainVerificationJob {
  organisationId: string;
  hostname: string;
  verificationToken: string;
}

export const WEBHOOK_DELIVERY_JOB = 'webhook-delivery';
export const WEBHOOK_REPLAY_JOB = 'webhook-replay';

/** One attempt of one delivery: the job id names both, so an attempt is scheduled once however often the log is read. */
export interface WebhookDeliveryJob {
  deliveryId: string;
  attempt: number;
}

/** One page of a replay; the page's job schedules the next, from where it stopped. */
export interface WebhookReplayJob {
  replayId: string;
  webhookId: string;
  organisationId: string;
  after: string | null;
  until: string;
  from: string | null;
  to: string | null;
}

/** An invitation's e-mail: the payload is `{ invitationId }`. */
export const INVITATION_EMAIL_JOB = 'invitation-email';
