import { z } from 'zod';
import {
  ACTION_CATEGORIES,
  type ChallengeRecord,
  COMPLETION_PERIODS,
  CRITERION_OPERATORS,
  actionsProblems,
  criterionProblem,
  datesProblems,
  rewardDistributionProblems,
  videoConfigProblems,
  type Problem,
} from '../../domain/challenge.ts';
import { newId } from '../../infra/ids.ts';
import { dateTime, hexId, whenValid } from './common.ts';
import { distributionWithIds, refineUniqueAllocationIds } from './distribution-assignment.ts';
import { freshDistributionView } from '../../domain/distribution-entry.ts';
import { fromLocalised } from '../../domain/localised-details.ts';
import { distributionOutput, MAX_ALLOCATION_UNITS, MAX_AWARD } from './distribution.ts';
import { localisedDetailsInput, localisedDetailsSchema, detailsBlockSchema } from './localised-details.ts';

const lowerHexId = hexId.transform((id) => id.toLowerCase());
const labels = z.array(z.string().trim().min(1).max(100)).max(50);
const scalar = z.union([z.string().max(1000), z.number(), z.boolean()]);

function addProblems(ctx: z.RefinementCtx, problems: Problem[]): void {
  for (const problem of problems) ctx.addIssue({ code: 'custom', path: problem.path, message: problem.message });
}

export const criterionSchema = z
  .object({
    field: z.string().min(1).max(200).describe('dot path into the custom event payload, such as order.total'),
    operator: z.enum(CRITERION_OPERATORS),
    value: z
      .union([scalar, z.array(scalar).max(100)])
      .optional()
      .describe(
        'eq, neq, contains: a string, number or boolean (contains: substring of a string field, or element of an array field); gt, gte, lt, lte: a number; in: an array of 1 to 100 scalars; exists: none, or a boolean (false: the field must be absent)',
      ),
  })
  .superRefine((criterion, ctx) => {
    const problem = criterionProblem(criterion);
    if (problem) addProblems(ctx, [problem]);
  }, whenValid)
  .meta({ id: 'ActionCriterion' });

const actionFields = {
  key: z
    .string()
    .min(1)
    .max(100)
    .regex(/^\S(.*\S)?$/, 'must not start or end with whitespace')
    .describe('matched (exactly) to custom event names; unique within the challenge'),
  category: z.enum(ACTION_CATEGORIES).describe("the XP bucket the action's XP goes to"),
  criteria: z.array(criterionSchema).max(50).default([]).describe('every criterion must hold for an attempt to complete the action'),
  xp: z.number().min(0).max(MAX_AWARD).default(0),
  isSkippable: z.boolean().default(false).describe('a skipped action is not needed to complete the challenge; at least one action is not skippable'),
  details: localisedDetailsInput,
  distribution: distributionWithIds
    .nullable()
    .optional()
    .describe('what completing the action pays out; also settable by POST /actions/{actionId}/distribution'),
};

export const actionInput = z.object(actionFields).meta({ id: 'ActionInput' });

export const actionReplacementInput = z
  .object({
    id: lowerHexId
      .optional()
      .describe("an existing action's id keeps that action's id and, when distribution is absent, its distribution; without it the action is new"),
    ...actionFields,
  })
  .meta({ id: 'ActionReplacementInput' });

export const rewardDistributionInput = z
  .strictObject({
    points: z.number().min(0).max(MAX_AWARD).default(0),
    xp: z.number().min(0).max(MAX_AWARD).default(0),
    distributionEventId: lowerHexId.optional().describe('generated when absent'),
    rewardAllocations: z
      .array(
        z.strictObject({ rewardId: lowerHexId, allocationId: lowerHexId, amountToDistribute: z.number().int().min(1).max(MAX_ALLOCATION_UNITS).default(1) }),
      )
      .max(100)
      .default([]),
    numberOfRewardsToReceive: z.number().int().min(0).optional().describe('how many of rewardAllocations a completer receives; default: all of them'),
  })
  .transform((reward) => ({
    ...reward,
    distributionEventId: reward.distributionEventId ?? newId(),
    numberOfRewardsToReceive: reward.numberOfRewardsToReceive ?? reward.rewardAllocations.length,
  }))
  .meta({ id: 'ChallengeRewardDistributionInput', description: 'What completing the whole challenge pays out' });

const videoUrl = z.union([z.literal(''), z.url({ protocol: /^https?$/, error: 'must be an http(s) URL or empty' }).max(2048)]).default('');
export const videoConfigInput = z.object({ videoUrl, isVideoEnabled: z.boolean().default(false) }).meta({ id: 'VideoConfigInput' });

const scheduleDescription = 'ISO 8601 date-time (Z or offset) or date, returned in UTC';
const patchable = {
  details: localisedDetailsInput,
  isLinear: z.boolean().describe('true: actions must be completed in the given order (skippable ones may be passed over)'),
  maxCompletionsPerPeriod: z.number().int().min(1).describe('how often one user may complete the challenge per period'),
  period: z.enum(COMPLETION_PERIODS).describe('the window maxCompletionsPerPeriod counts in; open: the challenge’s whole life'),
  startsAt: dateTime.describe(scheduleDescription),
  expiresAt: dateTime.describe(`${scheduleDescription}; must be after startsAt`),
  tags: labels,
  campaigns: labels,
  rewardDistribution: rewardDistributionInput,
  isGlobalTemplate: z.boolean().describe('true: every organisation sees it among its challenge templates'),
  availableAsTemplateForOrganisations: z.array(lowerHexId).max(100).describe('organisations that see it among their challenge templates'),
  featured: z.boolean(),
  unlockPrice: z.number().min(0).max(MAX_AWARD).describe('points a user spends to unlock the challenge; 0: unlocked'),
  videoConfig: videoConfigInput,
};

export const createChallengeBody = z
  .object({
    communityId: lowerHexId,
    ...patchable,
    actions: z.array(actionInput).min(1).max(100).describe('in order: the order of a linear challenge'),
    isLinear: patchable.isLinear.default(false),
    maxCompletionsPerPeriod: patchable.maxCompletionsPerPeriod.default(1),
    period: patchable.period.default('open'),
    tags: labels.default([]),
    campaigns: labels.default([]),
    rewardDistribution: rewardDistributionInput.prefault({}),
    isGlobalTemplate: patchable.isGlobalTemplate.default(false),
    availableAsTemplateForOrganisations: patchable.availableAsTemplateForOrganisations.default([]),
    featured: patchable.featured.default(false),
    unlockPrice: patchable.unlockPrice.default(0),
    videoConfig: videoConfigInput.prefault({}),
  })
  .superRefine((body, ctx) => {
    addProblems(ctx, [
      ...actionsProblems(body.actions),
      ...datesProblems(body.startsAt, body.expiresAt),
      ...rewardDistributionProblems(body.rewardDistribution),
      ...videoConfigProblems(body.videoConfig),
    ]);
  }, whenValid)
  .meta({ id: 'CreateChallenge' });

export const updateChallengeBody = z
  .object({
    details: patchable.details.optional(),
    actions: z.array(actionReplacementInput).min(1).max(100).optional().describe('replaces the whole list; only before the challenge starts (else 409)'),
    isLinear: patchable.isLinear.optional(),
    maxCompletionsPerPeriod: patchable.maxCompletionsPerPeriod.optional(),
    period: patchable.period.optional(),
    startsAt: patchable.startsAt.optional(),
    expiresAt: patchable.expiresAt.optional(),
    tags: patchable.tags.optional(),
    campaigns: patchable.campaigns.optional(),
    rewardDistribution: patchable.rewardDistribution.optional(),
    isGlobalTemplate: patchable.isGlobalTemplate.optional(),
    availableAsTemplateForOrganisations: patchable.availableAsTemplateForOrganisations.optional(),
    featured: patchable.featured.optional(),
    unlockPrice: patchable.unlockPrice.optional(),
    videoConfig: patchable.videoConfig.optional(),
  })
  .strict()
  .superRefine((body, ctx) => {
    if (Object.keys(body).length === 0) ctx.addIssue({ code: 'custom', message: 'change at least one field' });
    addProblems(ctx, [
      ...(body.actions ? actionsProblems(body.actions) : []),
      ...(body.startsAt && body.expiresAt ? datesProblems(body.startsAt, body.expiresAt) : []),
      ...(body.rewardDistribution ? rewardDistributionProblems(body.rewardDistribution) : []),
      ...(body.videoConfig ? videoConfigProblems(body.videoConfig) : []),
    ]);
  }, whenValid)
  .meta({
    id: 'UpdateChallenge',
    description:
      'Each field given replaces the current one whole (communityId cannot change). actions, isLinear and startsAt change only before the challenge starts (startsAt has passed): else 409.',
  });

const criterionOutput = z.object({
  field: z.string(),
  operator: z.enum(CRITERION_OPERATORS),
  value: z.union([scalar, z.array(scalar)]).optional(),
});

export const actionDistributionSchema = distributionOutput.extend({ actionId: hexId }).meta({ id: 'ActionDistribution' });

export const actionSchema = z
  .object({
    id: hexId,
    key: z.string(),
    category: z.enum(ACTION_CATEGORIES),
    criteria: z.array(criterionOutput),
    xp: z.number(),
    isSkippable: z.boolean(),
    details: localisedDetailsSchema,
    distribution: actionDistributionSchema.nullable(),
  })
  .meta({ id: 'Action' });

const rewardAllocationRef = z.object({ rewardId: z.string(), allocationId: z.string(), amountToDistribute: z.number() });

export const challengeRewardDistributionSchema = z
  .object({
    points: z.number(),
    xp: z.number(),
    distributionEventId: z.string(),
    rewardAllocations: z.array(rewardAllocationRef),
    numberOfRewardsToReceive: z.number(),
  })
  .meta({ id: 'ChallengeRewardDistribution' });

const videoConfigSchema = z.object({ videoUrl: z.string(), isVideoEnabled: z.boolean() });

export const challengeSchema = z
  .object({
    id: hexId,
    organisationId: hexId,
    communityId: hexId,
    details: localisedDetailsSchema,
    actions: z.array(actionSchema),
    isLinear: z.boolean(),
    maxCompletionsPerPeriod: z.number(),
    period: z.enum(COMPLETION_PERIODS),
    startsAt: z.string(),
    expiresAt: z.string(),
    tags: z.array(z.string()),
    campaigns: z.array(z.string()),
    rewardDistribution: challengeRewardDistributionSchema,
    isGlobalTemplate: z.boolean(),
    availableAsTemplateForOrganisations: z.array(hexId),
    featured: z.boolean(),
    unlockPrice: z.number(),
    videoConfig: videoConfigSchema,
    createdAt: z.string(),
    updatedAt: z.string(),
    createdBy: z.string().describe('id of the API token that created it'),
    updatedBy: z.string().describe('id of the API token that last changed it'),
  })
  .meta({ id: 'Challenge' });

const xpNumbers = { total: z.number(), knowledge: z.number(), creativity: z.number(), loyalty: z.number(), influence: z.number() };

export const challengeTemplateSchema = z
  .object({
    id: z.string(),
    organisationId: z.string().describe('the organisation that owns the challenge'),
    communityId: z.string(),
    additionalCommunityIds: z.array(z.string()).describe('always empty: a challenge belongs to one community here'),
    actionIds: z.array(z.string()).describe('in order'),
    tags: z.array(z.string()),
    campaigns: z.array(z.string()),
    availableAsTemplateForOrganisations: z.array(z.string()),
    groupIds: z.array(z.string()).describe('always empty: action groups are not supported'),
    details: detailsBlockSchema.describe('in the language of x-language, with fallbacks'),
    maxCompletionsPerPeriod: z.number(),
    numberOfActions: z.number(),
    unlockPrice: z.number(),
    actionGroups: z
      .array(z.object({ id: z.string(), details: detailsBlockSchema, parentGroupId: z.string() }))
      .describe('always empty: action groups are not supported'),
    isLinear: z.boolean(),
    isGlobalTemplate: z.boolean(),
    enabledForSingleView: z.boolean().describe('always false'),
    featured: z.boolean(),
    isSkippable: z.boolean().describe('true when any of its actions is skippable'),
    startedCount: z.number().describe('runs of the challenge started, by every user, all time'),
    completedCount: z.number().describe('runs of the challenge completed, all time'),
    uniqueUsersStartedCount: z.number().describe('users who started it at least once'),
    uniqueUsersCompletedCount: z.number().describe('users who completed it at least once'),
    createdAt: z.string(),
    updatedAt: z.string(),
    startDate: z.string().describe('same as startsAt'),
    endDate: z.string().describe('same as expiresAt'),
    startsAt: z.string(),
    expiresAt: z.string(),
    videoConfig: videoConfigSchema,
    xpConfig: z.object({ ...xpNumbers, participation: z.number(), contribution: z.number() }).describe("sums of the actions' XP per category, and in total"),
    rewardDistribution: challengeRewardDistributionSchema,
    actionsRewardDistribution: z
      .object({ points: z.number(), xp: z.number(), rewardAllocations: z.array(rewardAllocationRef) })
      .describe("sums of the actions' distributions: pointsToDistribute, bonusXpToDistribute, and their allocations in action order"),
    threadId: z.string().describe('always empty: discussion threads are not part of this service'),
  })
  .meta({ id: 'ChallengeTemplate' });

export const actionDistributionBody = distributionWithIds
  .superRefine((entry, ctx) => refineUniqueAllocationIds([entry], ctx, (_i, j) => ['rewardsConfig', 'allocations', j, 'id']), whenValid)
  .meta({ id: 'AssignActionDistribution', description: "Replaces the action's distribution" });

export type ChallengeView = z.infer<typeof challengeSchema>;

/** A challenge as the admin API shows it. */
export function challengeView(record: ChallengeRecord): ChallengeView {
  return {
    id: record.challengeId,
    organisationId: record.organisationId,
    communityId: record.communityId,
    details: fromLocalised(record.details),
    actions: record.actions.map((action) => ({
      id: action.actionId,
      key: action.key,
      category: action.category,
      criteria: action.criteria,
      xp: action.xp,
      isSkippable: action.isSkippable,
      details: fromLocalised(action.details),
      distribution: action.distribution ? { ...freshDistributionView(action.distribution), actionId: action.actionId } : null,
    })),
    isLinear: record.isLinear,
    maxCompletionsPerPeriod: record.maxCompletionsPerPeriod,
    period: record.period,
    startsAt: record.startsAt,
    expiresAt: record.expiresAt,
    tags: record.tags,
    campaigns: record.campaigns,
    rewardDistribution: record.rewardDistribution,
    isGlobalTemplate: record.isGlobalTemplate,
    availableAsTemplateForOrganisations: record.availableAsTemplateForOrganisations,
    featured: record.featured,
    unlockPrice: record.unlockPrice,
    videoConfig: record.videoConfig,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    createdBy: record.createdBy,
    updatedBy: record.updatedBy,
  };
}
