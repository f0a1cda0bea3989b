import { Router } from 'express';
import { sql, type Kysely } from 'kysely';
import { z } from 'zod';
import { xpConfigOf, type ChallengeRecord } from '../domain/challenge.ts';
import { LANGUAGE_PATTERN, pickDetails } from '../domain/localised-details.ts';
import { tenantOf } from '../infra/auth.ts';
import { challengeTemplateSchema } from '../api/contract/challenges.ts';
import { pageOf } from '../api/contract/common.ts';
import { languageHeader } from '../api/contract/localised-details.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { badRequest } from '../infra/http/errors.ts';
import { newestFirst, pagination, type Page } from '../infra/http/pagination.ts';
import { parse } from '../api/routes.ts';
import { readYourWrites } from './read-your-writes.ts';
import type { ServiceContext } from '../api/context.ts';
import type { ChallengeTables } from '../projectors/challenges.ts';
import type { OrganisationTables } from '../projectors/organisations.ts';
import type { AchievementTables } from '../projectors/achievements.ts';
import { STEP_ANALYTICS_PROJECTION, type StepAnalyticsTables } from '../projectors/challenge-step-analytics.ts';
import { minPositionHeader } from './read-your-writes.ts';
import { withTableTypes } from '../infra/database.ts';

export type ChallengeTemplate = z.infer<typeof challengeTemplateSchema>;

export function templateQueries(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();
  const db: Kysely<TemplateTables> = withTableTypes(ctx.database.db);

  admin.route(
    router,
    {
      method: 'get',
      path: '/templates/challenges',
      operationId: 'listChallengeTemplates',
      tag: 'Challenges',
      summary: 'List the challenge templates available to the organisation, newest first',
      description:
        "Available: the organisation's own challenges, every challenge with `isGlobalTemplate`, and those whose `availableAsTemplateForOrganisations` lists the organisation. `details` is in the language of `x-language`, else the organisation's default language, else the challenge's first language.",
      query: pagination,
      headers: [languageHeader, minPositionHeader],
      responses: { 200: { description: 'A page of challenge templates', schema: pageOf(challengeTemplateSchema) } },
    },
    readYourWrites(db, ['challenges', 'organisations', STEP_ANALYTICS_PROJECTION, 'achievements'], ctx.config.readYourWritesTimeoutMs),
    async (req, res) => {
      const { limit, skip } = parse(pagination, req.query);
      const language = req.get('x-language');
      if (language !== undefined && !LANGUAGE_PATTERN.test(language)) {
        throw badRequest([{ message: 'x-language: must be a language tag such as en or pt-BR', path: ['x-language'] }]);
      }
      const { organisationId } = tenantOf(res);
      const available = db
        .selectFrom('challenges')
        .where((eb) =>
          eb.or([
            eb('organisation_id', '=', organisationId),
            eb('is_global_template', '=', true),
            sql<boolean>`available_as_template_for @> array[${organisationId}]::text[]`,
          ]),
        );
      const [{ rows, totalCount }, organisation] = await Promise.all([
        newestFirst(available, { limit, skip }),
        db.selectFrom('organisations').select('default_language').where('id', '=', organisationId).executeTakeFirst(),
      ]);
      const organisationDefault = organisation?.default_language;
      const progress = await progressOf(
        db,
        rows.map((row) => row.id),
      );
      const page: Page<ChallengeTemplate> = {
        totalCount,
        edges: rows.map((row) => templateOf(row.document, language, organisationDefault, progress.get(row.id))),
      };
      res.json(page);
    },
  );

  return router;
}

type TemplateTables = ChallengeTables & OrganisationTables & Pick<StepAnalyticsTables, 'analytics_challenge_starts'> & Pick<AchievementTables, 'achievements'>;

/** How far users got with a challenge: runs started and completed, and the users who did each (all time). */
export interface ChallengeProgress {
  started: number;
  completed: number;
  usersStarted: number;
  usersCompleted: number;
}

/**
 * The progress of the page's challenges: starts from the step analytics' all-time row, completions from the
 * achievements (one per completed run, by a partial index of completions).
 */
async function progressOf(db: Kysely<TemplateTables>, challengeIds: string[]): Promise<Map<string, ChallengeProgress>> {
  const progress = new Map<string, ChallengeProgress>();
  if (challengeIds.length === 0) return progress;
  const [starts, completions] = await Promise.all([
    db.selectFrom('analytics_challenge_starts').select(['challenge_id', 'starts', 'users_started']).where('challenge_id', 'in', challengeIds).execute(),
    db
      .selectFrom('achievements')
      .select((eb) => ['challenge_id', eb.fn.countAll<string>().as('completed'), eb.fn.count<string>('user_id').distinct().as('users')])
      .where('type', '=', 'challenge-completed')
      .where('challenge_id', 'in', challengeIds)
      .groupBy('challenge_id')
      .execute(),
  ]);
  const of = (id: string) => {
    let found = progress.get(id);
    if (!found) progress.set(id, (found = { started: 0, completed: 0, usersStarted: 0, usersCompleted: 0 }));
    return found;
  };
  for (const row of starts) Object.assign(of(row.challenge_id), { started: Number(row.starts), usersStarted: Number(row.users_started) });
  for (const row of completions) {
    if (row.challenge_id !== null) Object.assign(of(row.challenge_id), { completed: Number(row.completed), usersCompleted: Number(row.users) });
  }
  return progress;
}

/** A challenge as the contract's challenge template, in one language. */
export function templateOf(
  record: ChallengeRecord,
  language: string | undefined,
  organisationDefault: string | undefined,
  progress: ChallengeProgress = { started: 0, completed: 0, usersStarted: 0, usersCompleted: 0 },
): ChallengeTemplate {
  const distributions = record.actions.flatMap((action) => (action.distribution ? [action.distribution] : []));
  return {
    id: record.challengeId,
    organisationId: record.organisationId,
    communityId: record.communityId,
    additionalCommunityIds: [],
    actionIds: record.actions.map((action) => action.actionId),
    tags: record.tags,
    campaigns: record.campaigns,
    availableAsTemplateForOrganisations: record.availableAsTemplateForOrganisations,
    groupIds: [],
    details: pickDetails(record.details, language, organisationDefault),
    maxCompletionsPerPeriod: record.maxCompletionsPerPeriod,
    numberOfActions: record.actions.length,
    unlockPrice: record.unlockPrice,
    actionGroups: [],
    isLinear: record.isLinear,
    isGlobalTemplate: record.isGlobalTemplate,
    enabledForSingleView: false,
    featured: record.featured,
    isSkippable: record.actions.some((action) => action.isSkippable),
    startedCount: progress.started,
    completedCount: progress.completed,
    uniqueUsersStartedCount: progress.usersStarted,
    uniqueUsersCompletedCount: progress.usersCompleted,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    startDate: record.startsAt,
    endDate: record.expiresAt,
    startsAt: record.startsAt,
    expiresAt: record.expiresAt,
    videoConfig: record.videoConfig,
    xpConfig: xpConfigOf(record.actions),
    rewardDistribution: record.rewardDistribution,
    actionsRewardDistribution: {
      points: distributions.reduce((sum, entry) => sum + entry.pointsToDistribute, 0),
      xp: distributions.reduce((sum, entry) => sum + entry.bonusXpToDistribute, 0),
      rewardAllocations: distributions.flatMap((entry) =>
        entry.rewardsConfig.allocations.map((allocation) => ({
          rewardId: allocation.rewardId,
          allocationId: allocation.id,
          amountToDistribute: allocation.amountToDistribute,
        })),
      ),
    },
    threadId: '',
  };
}
