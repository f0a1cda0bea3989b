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

/** The fields an admin may still change while the leaderboard is `draft` or `scheduled`. */
export const EDITABLE_FIELDS = ['name', 'description', 'expiresAt', 'conditions'] as const;
export type LeaderboardEdits = Partial<Pick<LeaderboardDefinition, (typeof EDITABLE_FIELDS)[number]>>;

/** Which status an admin may move a leaderboard to from each status; archived is final. */
export const LEGAL_TRANSITIONS: Record<LeaderboardStatus, readonly LeaderboardStatus[]> = {
  draft: ['scheduled', 'live', 'archived'],
  scheduled: ['draft', 'live', 'archived'],
  live: ['expired', 'archived'],
  expired: ['archived'],
  archived: [],
};

const EDITABLE_STATUSES: readonly LeaderboardStatus[] = ['draft', 'scheduled'];
const STATUSES_REFUSING_DISTRIBUTION: readonly LeaderboardStatus[] = ['archived', 'expired'];

export interface Allocation {
  id: string;
  rewardId: string;
  supply: number;
  amountToDistribute: number;
}

/** What one rank range of a leaderboard earns: the shared distribution entry plus its ranks. */
export interface RankDistribution extends RankReward {
  pointsToDistribute: number;
  bonusXpToDistribute: number;
  rewardsConfig: { amountToDistribute: number; allocations: Allocation[] };
}

/** A rank range as a request carries it: allocation ids may still be missing. */
export interface RankRangeInput {
  startRank: number;
  endRank: number;
  rewardsConfig: { allocations: { id?: string }[] };
}

export interface DistributionProblem {
  path: (string | number)[];
  message: string;
}

/**
 * The rules a rank-range distribution must meet, as issues with the path of the offending entry: ranks are
 * integers >= 1, `endRank >= startRank`, no two ranges share a rank, and no allocation id appears twice.
 */
export function distributionProblems(rewards: readonly RankRangeInput[]): DistributionProblem[] {
  const problems: DistributionProblem[] = [];
  rewards.forEach((reward, index) => {
    for (const field of ['startRank', 'endRank'] as const) {
      if (!Number.isSafeInteger(reward[field]) || reward[field] < 1) {
        problems.push({ path: ['rewards', index, field], message: `rewards.${index}.${field}: must be an integer >= 1` });
      }
    }
    if (reward.endRank < reward.startRank) {
      problems.push({ path: ['rewards', index, 'endRank'], message: `rewards.${index}.endRank: must be >= startRank (${reward.startRank})` });
    }
  });
  const ordered = rewards.map((reward, index) => ({ reward, index })).sort((a, b) => a.reward.startRank - b.reward.startRank || a.index - b.index);
  // Against the range reaching furthest so far, so a wide range is reported against every range it covers.
  let widest = ordered[0];
  for (const next of ordered.slice(1)) {
    if (widest && next.reward.startRank <= widest.reward.endRank) {
      const [first, second] = widest.index < next.index ? [widest, next] : [next, widest];
      problems.push({
        path: ['rewards', second.index, 'startRank'],
        message: `rewards.${second.index} (ranks ${second.reward.startRank}-${second.reward.endRank}) overlaps rewards.${first.index} (ranks ${first.reward.startRank}-${first.reward.endRank})`,
      });
    }
    if (!widest || next.reward.endRank > widest.reward.endRank) widest = next;
  }
  const seen = new Map<string, string>();
  rewards.forEach((reward, index) => {
    reward.rewardsConfig.allocations.forEach((allocation, position) => {
      const id = allocation.id?.toLowerCase();
      if (id === undefined) return;
      const where = `rewards.${index}.rewardsConfig.allocations.${position}`;
      const earlier = seen.get(id);
      if (earlier)
        problems.push({ path: ['rewards', index, 'rewardsConfig', 'allocations', position, 'id'], message: `${where}.id: ${id} is also used by ${earlier}` });
      else seen.set(id, where);
    });
  });
  return problems;
}

interface LeaderboardRef {
  leaderboardId: string;
  organisationId: string;
}

export type LeaderboardEvent =
  | DomainEvent<'LeaderboardCreated', LeaderboardDefinition & LeaderboardRef & { createdBy: string; createdAt: string }>
  | DomainEvent<'LeaderboardUpdated', LeaderboardRef & { changes: LeaderboardEdits; updatedBy: string; updatedAt: string }>
  | DomainEvent<'LeaderboardStatusChanged', LeaderboardRef & { from: LeaderboardStatus; to: LeaderboardStatus; changedBy: string; changedAt: string }>
  | DomainEvent<'LeaderboardRewardsAssigned', LeaderboardRef & { rewards: RankDistribution[]; assignedBy: string; assignedAt: string }>;

export type LeaderboardCommand =
  | { type: 'CreateLeaderboard'; data: LeaderboardDefinition & LeaderboardRef & { actor: string; now: string } }
  | { type: 'UpdateLeaderboard'; data: LeaderboardRef & { status?: LeaderboardStatus; edits: LeaderboardEdits; actor: string; now: string } }
  | { type: 'AssignLeaderboardRewards'; data: LeaderboardRef & { rewards: RankDistribution[]; actor: string; now: string } };

export type LeaderboardState =
  { exists: false } | ({ exists: true; leaderboardId: string; organisationId: string; rewardsConfig: RankReward[] } & LeaderboardDefinition);

type ExistingLeaderboard = Extract<LeaderboardState, { exists: true }>;

/** Another organisation's leaderboard is as unknown as a missing one. */
function existing(state: LeaderboardState, ref: LeaderboardRef): ExistingLeaderboard {
  if (!state.exists || state.organisationId !== ref.organisationId) throw new DomainError('not_found', `Leaderboard ${ref.leaderboardId} not found`);
  return state;
}

/** Equal as JSON values, whatever the key order (the event store may hand objects back reordered). */
function sameValue(a: unknown, b: unknown): boolean {
  return canonical(a) === canonical(b);
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'undefined';
}

function byStartRank<T extends RankReward>(rewards: readonly T[]): T[] {
  return [...rewards].sort((a, b) => a.startRank - b.startRank);
}

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

      case 'UpdateLeaderboard': {
        const { leaderboardId, organisationId, status, edits, actor, now } = command.data;
        const current = existing(state, command.data);
        // A field sent with the value it already has is not a change, so a client may send the config back whole.
        const changes: LeaderboardEdits = {};
        for (const field of EDITABLE_FIELDS) {
          if (edits[field] !== undefined && !sameValue(edits[field], current[field])) Object.assign(changes, { [field]: edits[field] });
        }
        const changed = Object.keys(changes);
        if (changed.length > 0 && !EDITABLE_STATUSES.includes(current.status)) {
          throw new DomainError('conflict', `${changed.join(', ')} can only be changed while the leaderboard is draft or scheduled; it is ${current.status}`);
        }
        if (changes.expiresAt && Date.parse(changes.expiresAt) <= Date.parse(current.startsAt)) {
          throw new DomainError('invalid', `expiresAt: must be after startsAt (${current.startsAt})`);
        }
        const events: LeaderboardEvent[] = [];
        if (changed.length > 0) events.push({ type: 'LeaderboardUpdated', data: { leaderboardId, organisationId, changes, updatedBy: actor, updatedAt: now } });
        if (status !== undefined && status !== current.status) {
          if (!LEGAL_TRANSITIONS[current.status].includes(status)) {
            throw new DomainError('conflict', `A leaderboard cannot go from ${current.status} to ${status}`);
          }
          events.push({
            type: 'LeaderboardStatusChanged',
            data: { leaderboardId, organisationId, from: current.status, to: status, changedBy: actor, changedAt: now },
          });
        }
        return events;
      }

      case 'AssignLeaderboardRewards': {
        const { leaderboardId, organisationId, rewards, actor, now } = command.data;
        const current = existing(state, command.data);
        if (STATUSES_REFUSING_DISTRIBUTION.includes(current.status)) {
          throw new DomainError('conflict', `A leaderboard that is ${current.status} accepts no new distribution`);
        }
        const problems = distributionProblems(rewards);
        if (problems.length > 0) throw new DomainError('invalid', problems.map((problem) => problem.message).join('; '));
        return [
          { type: 'LeaderboardRewardsAssigned', data: { leaderboardId, organisationId, rewards: byStartRank(rewards), assignedBy: actor, assignedAt: now } },
        ];
      }
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'LeaderboardCreated': {
        const { createdBy: _createdBy, createdAt: _createdAt, ...definition } = event.data;
        return { exists: true, rewardsConfig: [], ...definition };
      }
      case 'LeaderboardUpdated':
        return state.exists ? { ...state, ...event.data.changes } : state;
      case 'LeaderboardStatusChanged':
        return state.exists ? { ...state, status: event.data.to } : state;
      case 'LeaderboardRewardsAssigned':
        return state.exists ? { ...state, rewardsConfig: rankRewardsOf(event.data.rewards) } : state;
    }
  },
};

/** The config's `rewardsConfig`: one `{startRank, endRank, distributionEventId}` per range, by start rank. */
export function rankRewardsOf(rewards: readonly RankDistribution[]): RankReward[] {
  return byStartRank(rewards).map(({ startRank, endRank, distributionEventId }) => ({ startRank, endRank, distributionEventId }));
}

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

/** Folds one event into the admin view of the config (what a write answers with). */
export function evolveLeaderboardConfig(config: LeaderboardConfig | null, event: LeaderboardEvent): LeaderboardConfig | null {
  if (event.type === 'LeaderboardCreated') {
    const { leaderboardId, createdBy, createdAt, ...definition } = event.data;
    return { id: leaderboardId, ...definition, rewardsConfig: [], createdAt, updatedAt: createdAt, createdBy, updatedBy: createdBy };
  }
  if (config === null) return null;
  switch (event.type) {
    case 'LeaderboardUpdated':
      return { ...config, ...event.data.changes, updatedAt: event.data.updatedAt, updatedBy: event.data.updatedBy };
    case 'LeaderboardStatusChanged':
      return { ...config, status: event.data.to, updatedAt: event.data.changedAt, updatedBy: event.data.changedBy };
    case 'LeaderboardRewardsAssigned':
      return { ...config, rewardsConfig: rankRewardsOf(event.data.rewards), updatedAt: event.data.assignedAt, updatedBy: event.data.assignedBy };
  }
}
