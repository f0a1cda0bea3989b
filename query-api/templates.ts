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
import { minPositionHeader } from './read-your-writes.ts';
import { withTableTypes } from '../infra/database.ts';

export type ChallengeTemplate = z.infer<typeof challengeTemplateSchema>;

export function templateQueries(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();
  const db: Kysely<ChallengeTables & OrganisationTables> = withTableTypes(ctx.database.db);

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
    readYourWrites(db, ['challenges', 'organisations'], ctx.config.readYourWritesTimeoutMs),
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
      const page: Page<ChallengeTemplate> = {
        totalCount,
        edges: rows.map((row) => templateOf(row.document, language, organisationDefault)),
      };
      res.json(page);
    },
  );

  return router;
}

/** A challenge as the contract's challenge template, in one language. */
export function templateOf(record: ChallengeRecord, language: string | undefined, organisationDefault: string | undefined): ChallengeTemplate {
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
    // Progress is recorded by the completion engine; until it exists nobody has started or completed one.
    startedCount: 0,
    completedCount: 0,
    uniqueUsersStartedCount: 0,
    uniqueUsersCompletedCount: 0,
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
