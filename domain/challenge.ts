import { DomainError, type Decider, type DomainEvent } from './decider.ts';
import { distributionProblems, type DistributionEntry } from './distribution-entry.ts';
import { localisedDetailsProblem, type LocalisedDetails } from './localised-details.ts';

/** The XP bucket an action's XP goes to (DESIGN §6). */
export const ACTION_CATEGORIES = ['knowledge', 'creativity', 'loyalty', 'influence', 'participation', 'contribution'] as const;
export type ActionCategory = (typeof ACTION_CATEGORIES)[number];

export const CRITERION_OPERATORS = ['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'in', 'exists', 'contains'] as const;
export type CriterionOperator = (typeof CRITERION_OPERATORS)[number];

/** The window `maxCompletionsPerPeriod` counts in; `open` is the challenge's whole life. */
export const COMPLETION_PERIODS = ['daily', 'weekly', 'monthly', 'yearly', 'open'] as const;
export type CompletionPeriod = (typeof COMPLETION_PERIODS)[number];

export type Scalar = string | number | boolean;

/** A condition on a custom event's payload: `field` is a dot path into it (`order.total`). */
export interface Criterion {
  field: string;
  operator: CriterionOperator;
  value?: Scalar | Scalar[];
}

export const FIELD_PATH_PATTERN = /^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$/;
export const MAX_IN_VALUES = 100;

export interface Action {
  actionId: string;
  /** Matched to custom event names, exactly (case-sensitive). */
  key: string;
  category: ActionCategory;
  criteria: Criterion[];
  xp: number;
  isSkippable: boolean;
  details: LocalisedDetails;
  distribution: DistributionEntry | null;
}

/** What a completer receives for the whole challenge (the contract's challenge `rewardDistribution`). */
export interface ChallengeRewardDistribution {
  points: number;
  xp: number;
  distributionEventId: string;
  rewardAllocations: { rewardId: string; allocationId: string; amountToDistribute: number }[];
  numberOfRewardsToReceive: number;
}

export interface VideoConfig {
  videoUrl: string;
  isVideoEnabled: boolean;
}

export interface ChallengeDefinition {
  communityId: string;
  details: LocalisedDetails;
  /** In order: the order a linear challenge must be done in. */
  actions: Action[];
  isLinear: boolean;
  maxCompletionsPerPeriod: number;
  period: CompletionPeriod;
  startsAt: string;
  expiresAt: string;
  tags: string[];
  campaigns: string[];
  rewardDistribution: ChallengeRewardDistribution;
  isGlobalTemplate: boolean;
  availableAsTemplateForOrganisations: string[];
  featured: boolean;
  unlockPrice: number;
  videoConfig: VideoConfig;
}

export interface ChallengeRecord extends ChallengeDefinition {
  challengeId: string;
  organisationId: string;
  createdAt: string;
  createdBy: string;
  updatedAt: string;
  updatedBy: string;
}

/** Every field but the community can be patched; actions and isLinear only before the challenge starts. */
export type ChallengeChanges = Partial<Omit<ChallengeDefinition, 'communityId'>>;

/**
 * An action of a PATCH. `kept`: the client named an existing action's id, so the action keeps that id
 * and, when `distribution` is undefined, its distribution. A new action has a fresh id.
 */
export interface ActionReplacement extends Omit<Action, 'distribution'> {
  kept: boolean;
  distribution: DistributionEntry | null | undefined;
}

export type ChallengeEvent =
  | DomainEvent<'ChallengeCreated', ChallengeDefinition & { challengeId: string; organisationId: string; createdBy: string; createdAt: string }>
  | DomainEvent<'ChallengeUpdated', { challengeId: string; organisationId: string; changes: ChallengeChanges; updatedBy: string; updatedAt: string }>
  | DomainEvent<
      'ActionDistributionAssigned',
      { challengeId: string; organisationId: string; actionId: string; distribution: DistributionEntry; assignedBy: string; assignedAt: string }
    >;

interface Stamp {
  challengeId: string;
  organisationId: string;
  actor: string;
  now: string;
}

export type ChallengeCommand =
  | { type: 'CreateChallenge'; data: ChallengeDefinition & Stamp }
  | { type: 'UpdateChallenge'; data: Stamp & { changes: Omit<ChallengeChanges, 'actions'> & { actions?: ActionReplacement[] } } }
  | { type: 'AssignActionDistribution'; data: Stamp & { actionId: string; distribution: DistributionEntry } };

export type ChallengeState = { exists: false } | ({ exists: true } & ChallengeRecord);

/** A rule broken, with where in the request it was broken. */
export interface Problem {
  path: (string | number)[];
  message: string;
}

/** What is wrong with one criterion, given its operator, if anything. */
export function criterionProblem(criterion: Criterion): Problem | null {
  const { field, operator, value } = criterion;
  if (!FIELD_PATH_PATTERN.test(field)) return { path: ['field'], message: 'must be a dot path into the event payload, such as order.total' };
  const isScalar = (v: unknown): v is Scalar => typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v)) || typeof v === 'boolean';
  switch (operator) {
    case 'eq':
    case 'neq':
    case 'contains':
      return isScalar(value) ? null : { path: ['value'], message: `${operator} needs a string, number or boolean value` };
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte':
      return typeof value === 'number' && Number.isFinite(value) ? null : { path: ['value'], message: `${operator} needs a number value` };
    case 'in':
      if (!Array.isArray(value) || value.length === 0 || value.length > MAX_IN_VALUES || !value.every(isScalar)) {
        return { path: ['value'], message: `in needs an array of 1 to ${MAX_IN_VALUES} strings, numbers or booleans` };
      }
      return null;
    case 'exists':
      return value === undefined || typeof value === 'boolean'
        ? null
        : { path: ['value'], message: 'exists takes no value, or a boolean (false: the field must be absent)' };
  }
}

type ActionRules = Pick<Action, 'key' | 'criteria' | 'xp' | 'isSkippable' | 'details'> & { distribution?: DistributionEntry | null };

/** The rules on a challenge's list of actions: keys, criteria, XP, details, distributions, skippability. */
export function actionsProblems(actions: ActionRules[]): Problem[] {
  if (actions.length === 0) return [{ path: ['actions'], message: 'a challenge needs at least one action' }];
  const problems: Problem[] = [];
  const keys = new Map<string, number>();
  actions.forEach((action, i) => {
    const at = (...path: (string | number)[]) => ['actions', i, ...path];
    if (action.key.trim().length === 0) problems.push({ path: at('key'), message: 'must not be empty' });
    const first = keys.get(action.key);
    if (first !== undefined)
      problems.push({ path: at('key'), message: `"${action.key}" is already the key of action ${first}; keys are unique within a challenge` });
    else keys.set(action.key, i);
    action.criteria.forEach((criterion, j) => {
      const problem = criterionProblem(criterion);
      if (problem) problems.push({ path: at('criteria', j, ...problem.path), message: problem.message });
    });
    if (!(action.xp >= 0)) problems.push({ path: at('xp'), message: 'must be >= 0' });
    const details = localisedDetailsProblem(action.details);
    if (details) problems.push({ path: at('details'), message: details });
    if (action.distribution) {
      for (const message of distributionProblems([action.distribution])) problems.push({ path: at('distribution'), message });
    }
  });
  if (actions.every((action) => action.isSkippable)) {
    problems.push({ path: ['actions'], message: 'at least one action must not be skippable, or the challenge would complete with nothing done' });
  }
  return problems;
}

export function datesProblems(startsAt: string, expiresAt: string): Problem[] {
  return Date.parse(expiresAt) > Date.parse(startsAt) ? [] : [{ path: ['expiresAt'], message: 'must be after startsAt' }];
}

export function rewardDistributionProblems(reward: ChallengeRewardDistribution): Problem[] {
  const at = (...path: (string | number)[]) => ['rewardDistribution', ...path];
  const problems: Problem[] = [];
  if (!(reward.points >= 0)) problems.push({ path: at('points'), message: 'must be >= 0' });
  if (!(reward.xp >= 0)) problems.push({ path: at('xp'), message: 'must be >= 0' });
  const seen = new Set<string>();
  reward.rewardAllocations.forEach((allocation, i) => {
    if (seen.has(allocation.allocationId)) problems.push({ path: at('rewardAllocations', i, 'allocationId'), message: 'is given twice' });
    seen.add(allocation.allocationId);
  });
  if (
    !Number.isInteger(reward.numberOfRewardsToReceive) ||
    reward.numberOfRewardsToReceive < 0 ||
    reward.numberOfRewardsToReceive > reward.rewardAllocations.length
  ) {
    problems.push({ path: at('numberOfRewardsToReceive'), message: 'must be a whole number from 0 to the number of rewardAllocations' });
  }
  return problems;
}

export function videoConfigProblems(video: VideoConfig): Problem[] {
  return video.isVideoEnabled && video.videoUrl === '' ? [{ path: ['videoConfig', 'videoUrl'], message: 'is needed when isVideoEnabled is true' }] : [];
}

/** Every rule on a whole challenge, with paths as in the request body. */
export function definitionProblems(definition: Omit<ChallengeDefinition, 'actions'> & { actions: ActionRules[] }): Problem[] {
  const problems: Problem[] = [];
  const details = localisedDetailsProblem(definition.details);
  if (details) problems.push({ path: ['details'], message: details });
  problems.push(...actionsProblems(definition.actions));
  if (!Number.isInteger(definition.maxCompletionsPerPeriod) || definition.maxCompletionsPerPeriod < 1) {
    problems.push({ path: ['maxCompletionsPerPeriod'], message: 'must be a whole number >= 1' });
  }
  problems.push(...datesProblems(definition.startsAt, definition.expiresAt));
  problems.push(...rewardDistributionProblems(definition.rewardDistribution));
  if (!(definition.unlockPrice >= 0)) problems.push({ path: ['unlockPrice'], message: 'must be >= 0' });
  problems.push(...videoConfigProblems(definition.videoConfig));
  return problems;
}

function refuseProblems(problems: Problem[]): void {
  const [first] = problems;
  if (first) throw new DomainError('invalid', `${first.path.join('.')}: ${first.message}`);
}

/** The challenge, if it exists and is this organisation's: another organisation's challenge does not exist for it. */
function existing(state: ChallengeState, organisationId: string, challengeId: string): ChallengeRecord {
  if (!state.exists || state.organisationId !== organisationId) throw new DomainError('not_found', `Challenge ${challengeId} not found`);
  const { exists: _exists, ...record } = state;
  return record;
}

/** A challenge has started once its start time has passed (no engine yet records a first attempt). */
export function hasStarted(challenge: Pick<ChallengeDefinition, 'startsAt'>, now: string): boolean {
  return Date.parse(now) >= Date.parse(challenge.startsAt);
}

function definitionOf(record: ChallengeRecord): ChallengeDefinition {
  const { challengeId: _c, organisationId: _o, createdAt: _ca, createdBy: _cb, updatedAt: _ua, updatedBy: _ub, ...definition } = record;
  return definition;
}

export const challengeDecider: Decider<ChallengeCommand, ChallengeEvent, ChallengeState> = {
  initialState: { exists: false },

  decide(command, state) {
    switch (command.type) {
      case 'CreateChallenge': {
        const { actor, now, ...definition } = command.data;
        if (state.exists) throw new DomainError('conflict', `Challenge ${definition.challengeId} already exists`);
        refuseProblems(definitionProblems(definition));
        return [{ type: 'ChallengeCreated', data: { ...definition, createdBy: actor, createdAt: now } }];
      }

      case 'UpdateChallenge': {
        const { challengeId, organisationId, actor, now } = command.data;
        const challenge = existing(state, organisationId, challengeId);
        const { actions: replacement, ...rest } = command.data.changes;
        if (hasStarted(challenge, now)) {
          if (replacement !== undefined || (rest.isLinear !== undefined && rest.isLinear !== challenge.isLinear)) {
            throw new DomainError('conflict', `Challenge ${challengeId} started at ${challenge.startsAt}: its actions and isLinear can no longer change`);
          }
          if (rest.startsAt !== undefined && rest.startsAt !== challenge.startsAt) {
            throw new DomainError('conflict', `Challenge ${challengeId} started at ${challenge.startsAt}: its startsAt can no longer change`);
          }
        }
        const changes: ChallengeChanges = { ...rest };
        if (replacement !== undefined) changes.actions = resolveActions(challenge, replacement);
        refuseProblems(definitionProblems({ ...definitionOf(challenge), ...changes }));
        return [{ type: 'ChallengeUpdated', data: { challengeId, organisationId, changes, updatedBy: actor, updatedAt: now } }];
      }

      case 'AssignActionDistribution': {
        const { challengeId, organisationId, actionId, distribution, actor, now } = command.data;
        const challenge = existing(state, organisationId, challengeId);
        if (!challenge.actions.some((action) => action.actionId === actionId)) throw new DomainError('not_found', `Action ${actionId} not found`);
        refuseProblems(distributionProblems([distribution]).map((message) => ({ path: [], message })));
        return [{ type: 'ActionDistributionAssigned', data: { challengeId, organisationId, actionId, distribution, assignedBy: actor, assignedAt: now } }];
      }
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'ChallengeCreated': {
        const { createdBy, createdAt, ...definition } = event.data;
        return { exists: true, ...definition, createdBy, createdAt, updatedBy: createdBy, updatedAt: createdAt };
      }
      case 'ChallengeUpdated':
        if (!state.exists) return state;
        return { ...state, ...event.data.changes, updatedBy: event.data.updatedBy, updatedAt: event.data.updatedAt };
      case 'ActionDistributionAssigned': {
        if (!state.exists) return state;
        const { actionId, distribution, assignedBy, assignedAt } = event.data;
        const actions = state.actions.map((action) => (action.actionId === actionId ? { ...action, distribution } : action));
        return { ...state, actions, updatedBy: assignedBy, updatedAt: assignedAt };
      }
    }
  },
};

/** The replacement list, each action with its id and distribution settled against the current actions. */
function resolveActions(challenge: ChallengeRecord, replacement: ActionReplacement[]): Action[] {
  const ids = new Set<string>();
  return replacement.map(({ kept, distribution, ...action }, i) => {
    if (ids.has(action.actionId)) throw new DomainError('invalid', `actions.${i}.id: action ${action.actionId} is listed twice`);
    ids.add(action.actionId);
    const current = kept ? challenge.actions.find((candidate) => candidate.actionId === action.actionId) : undefined;
    if (kept && !current) throw new DomainError('invalid', `actions.${i}.id: ${action.actionId} is not an action of this challenge`);
    return { ...action, distribution: distribution === undefined ? (current?.distribution ?? null) : distribution };
  });
}

/** XP per category over the actions, and their total (a template's `xpConfig`). */
export function xpConfigOf(actions: Pick<Action, 'category' | 'xp'>[]): Record<ActionCategory | 'total', number> {
  const config = { total: 0, knowledge: 0, creativity: 0, loyalty: 0, influence: 0, participation: 0, contribution: 0 };
  for (const action of actions) {
    config[action.category] += action.xp;
    config.total += action.xp;
  }
  return config;
}
