import { DomainError, type Decider, type DomainEvent } from './decider.ts';

export const METRIC_TYPES = [
  'consistent-weeks',
  'qualifying-active-days',
  'total-actions-completed',
  'total-challenges-completed',
  'total-challenges-started',
  'total-xp',
  'unique-challenges-completed',
] as const;
export type MetricType = (typeof METRIC_TYPES)[number];

export const PERIODS = ['daily', 'weekly', 'monthly', 'yearly', 'open'] as const;
export type Period = (typeof PERIODS)[number];

export const LEADERBOARD_STATUSES = ['archived', 'draft', 'expired', 'live', 'scheduled'] as const;
export type LeaderboardStatus = (typeof LEADERBOARD_STATUSES)[number];

export type Condition = { type: 'community'; communityId: string } | { type: 'variable-config'; variableConfigId: string; value: string | number | boolean };

export interface RankReward {
  startRank: number;
  endRank: number;
  distributionEventId: string;
}

export interface LeaderboardDefinition {
  name: string;
  description: string | null;
  metricType: MetricType;
  period: Period;
  startsAt: string;
  expiresAt: string | null;
  status: LeaderboardStatus;
  conditions: Condition[];
}

/**
 * A metric that cannot vary within one window ranks everybody equal, so it is refused (DESIGN §6):
 * consistent weeks inside a day or a week, active days inside a day.
 */
export function metricFitsPeriod(metricType: MetricType, period: Period): boolean {
  if (metricType === 'consistent-weeks') return period !== 'daily' && period !== 'weekly';
  if (metricType === 'qualifying-active-days') return period !== 'daily';
  return true;
}

export type LeaderboardEvent = DomainEvent<
  'LeaderboardCreated',
  LeaderboardDefinition & { leaderboardId: string; organisationId: string; createdBy: string; createdAt: string }
>;

export type LeaderboardCommand = {
  type: 'CreateLeaderboard';
  data: LeaderboardDefinition & { leaderboardId: string; organisationId: string; actor: string; now: string };
};

export type LeaderboardState =
  { exists: false } | ({ exists: true; leaderboardId: string; organisationId: string; rewardsConfig: RankReward[] } & LeaderboardDefinition);

export const leaderboardDecider: Decider<LeaderboardCommand, LeaderboardEvent, LeaderboardState> = {
  initialState: { exists: false },

  decide(command, state) {
    switch (command.type) {
      case 'CreateLeaderboard': {
        const { actor, now, ...definition } = command.data;
        if (state.exists) throw new DomainError('conflict', `Leaderboard ${definition.leaderboardId} already exists`);
        if (!metricFitsPeriod(definition.metricType, definition.period)) {
          throw new DomainError('invalid', `metricType ${definition.metricType} cannot vary within a ${definition.period} period`);
        }
        if (definition.expiresAt !== null && Date.parse(definition.expiresAt) <= Date.parse(definition.startsAt)) {
          throw new DomainError('invalid', 'expiresAt must be after startsAt');
        }
        return [{ type: 'LeaderboardCreated', data: { ...definition, createdBy: actor, createdAt: now } }];
      }
    }
  },

  evolve(_state, event) {
    switch (event.type) {
      case 'LeaderboardCreated': {
        const { createdBy: _createdBy, createdAt: _createdAt, ...definition } = event.data;
        return { exists: true, rewardsConfig: [], ...definition };
      }
    }
  },
};

/** The leaderboard config as the admin API returns it. */
export interface LeaderboardConfig extends LeaderboardDefinition {
  id: string;
  organisationId: string;
  rewardsConfig: RankReward[];
  createdAt: string;
  updatedAt: string;
  createdBy: string;
  updatedBy: string;
}
