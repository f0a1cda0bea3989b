import { Router } from 'express';
import type { Kysely, Transaction } from 'kysely';
import type { ServiceContext } from '../api/context.ts';
import { NO_STEP_COUNTS, stepRates, type StartCounts, type StepCounts } from '../domain/analytics.ts';
import type { ChallengeRecord } from '../domain/challenge.ts';
import { pickDetails } from '../domain/localised-details.ts';
import { tenantOf } from '../infra/auth.ts';
import { RANGE_DESCRIPTION, actionStepsQuery, actionStepsSchema, type ActionStep } from '../api/contract/analytics.ts';
import { languageHeader } from '../api/contract/localised-details.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { notFound } from '../infra/http/errors.ts';
import { parse } from '../api/routes.ts';
import { minPositionHeader, readYourWrites } from './read-your-writes.ts';
import { STEP_ANALYTICS_PROJECTION, type StepAnalyticsTables } from '../projectors/challenge-step-analytics.ts';
import { withTableTypes } from '../infra/database.ts';
import {
  count,
  inOneSnapshot,
  localDays,
  organisationSettings,
  unbounded,
  wantedLanguage,
  withinDays,
  type Days,
  type OrganisationSettingsTables,
} from './analytics-days.ts';

type Query = ReturnType<typeof actionStepsQuery.parse>;

/**
 * The columns of `challenges` read here. The table belongs to the challenges read model
 * (projectors/challenges.ts); only what is read here is declared.
 */
interface ChallengeDocumentTables {
  challenges: { id: string; organisation_id: string; document: ChallengeRecord };
}

type Tables = StepAnalyticsTables & ChallengeDocumentTables & OrganisationSettingsTables;

export function challengeStepAnalyticsQueries(ctx: ServiceContext, analytics: ApiDescription): Router {
  const router = Router();
  const db: Kysely<Tables> = withTableTypes(ctx.database.db);

  analytics.route(
    router,
    {
      method: 'get',
      path: '/challenges/stats/action-steps',
      operationId: 'getChallengeStepStats',
      tag: 'Challenges',
      summary: "A challenge's steps in order, with attempts, criteria, completions and the funnel's rates",
      description: [
        "One entry per action of the challenge as it is defined now, ordered by `stepIndex` (the action's position). An attempt is a custom event matching the action's key while the challenge is live, whatever its outcome (completed, criteria not met, out of order, already completed, limit reached); `criteriaMetCount + criteriaNotMetCount = totalAttempts`.",
        `${RANGE_DESCRIPTION} Attempts, completions and starts count on the local day they happened; users are distinct within the range.`,
        '**Rates** are fractions in [0, 1] rounded to 4 decimals (not percents), 0 when the denominator is 0. `completionRate` = users who completed the step / users who started the challenge. `dropOffRate` of step i = 1 − totalCompletions(i) / totalCompletions(i − 1); for step 0 the denominator is the number of runs started (a repeatable challenge started again counts again); a result below 0 (a later step done more often) is 0.',
        '`actionTitle` is in the language of `x-language`, else its primary subtag, else the organisation’s default language, else the action’s first language.',
      ].join('\n\n'),
      query: actionStepsQuery,
      headers: [languageHeader, minPositionHeader],
      responses: { 200: { description: 'The steps, by stepIndex', schema: actionStepsSchema } },
    },
    readYourWrites(db, [STEP_ANALYTICS_PROJECTION, 'challenges', 'organisations'], ctx.config.readYourWritesTimeoutMs),
    async (req, res) => {
      const query = parse(actionStepsQuery, req.query);
      const language = wantedLanguage(req);
      res.json({ steps: await actionSteps(db, tenantOf(res).organisationId, query, language) });
    },
  );

  return router;
}

export async function actionSteps(db: Kysely<Tables>, organisationId: string, query: Query, language: string | undefined): Promise<ActionStep[]> {
  const settings = await organisationSettings(db, organisationId);
  const days = localDays(query, settings.timeZone);
  const { challenge, counts, started } = await inOneSnapshot(db, async (trx) => {
    const [row, counts, started] = await Promise.all([
      trx.selectFrom('challenges').select('document').where('organisation_id', '=', organisationId).where('id', '=', query.challengeId).executeTakeFirst(),
      stepCounts(trx, query.challengeId, days),
      startCounts(trx, query.challengeId, days),
    ]);
    return { challenge: row?.document, counts, started };
  });
  if (!challenge) throw notFound('Challenge not found');
  const steps = challenge.actions.map((action) => counts.get(action.actionId) ?? NO_STEP_COUNTS);
  const rates = stepRates(steps, started);
  return challenge.actions.map((action, stepIndex) => {
    const step = steps[stepIndex]!;
    return {
      actionId: action.actionId,
      actionTitle: pickDetails(action.details, language, settings.defaultLanguage).title,
      actionKey: action.key,
      category: action.category,
      stepIndex,
      completionRate: rates[stepIndex]!.completionRate,
      totalCompletions: step.completions,
      dropOffRate: rates[stepIndex]!.dropOffRate,
      criteriaMetCount: step.criteriaMet,
      criteriaNotMetCount: step.criteriaNotMet,
      totalAttempts: step.attempts,
      uniqueUsersCount: step.usersAttempted,
    };
  });
}

/** Per action: the all-time counters, or the range's per-day rows summed (users distinct within the range). */
async function stepCounts(trx: Transaction<Tables>, challengeId: string, days: Days): Promise<Map<string, StepCounts>> {
  const rows = unbounded(days)
    ? await trx
        .selectFrom('analytics_steps')
        .select(['action_id', 'attempts', 'criteria_met', 'criteria_not_met', 'completions', 'users_attempted', 'users_completed'])
        .where('challenge_id', '=', challengeId)
        .execute()
    : await withinDays(
        trx
          .selectFrom('analytics_step_days')
          .select((eb) => [
            'action_id',
            eb.fn.sum('attempts').as('attempts'),
            eb.fn.sum('criteria_met').as('criteria_met'),
            eb(eb.fn.sum('attempts'), '-', eb.fn.sum('criteria_met')).as('criteria_not_met'),
            eb.fn.sum('completions').as('completions'),
            eb.fn.count('user_id').distinct().as('users_attempted'),
            eb.fn.count('user_id').distinct().filterWhere('completions', '>', 0).as('users_completed'),
          ])
          .where('challenge_id', '=', challengeId),
        days,
      )
        .groupBy('action_id')
        .execute();
  return new Map(
    rows.map((row) => [
      row.action_id,
      {
        attempts: count(row.attempts),
        criteriaMet: count(row.criteria_met),
        criteriaNotMet: count(row.criteria_not_met),
        completions: count(row.completions),
        usersAttempted: count(row.users_attempted),
        usersCompleted: count(row.users_completed),
      },
    ]),
  );
}

async function startCounts(trx: Transaction<Tables>, challengeId: string, days: Days): Promise<StartCounts> {
  const row = unbounded(days)
    ? await trx.selectFrom('analytics_challenge_starts').select(['starts', 'users_started']).where('challenge_id', '=', challengeId).executeTakeFirst()
    : await withinDays(
        trx
          .selectFrom('analytics_start_days')
          .select((eb) => [eb.fn.sum('starts').as('starts'), eb.fn.count('user_id').distinct().as('users_started')])
          .where('challenge_id', '=', challengeId),
        days,
      ).executeTakeFirst();
  return { starts: count(row?.starts), usersStarted: count(row?.users_started) };
}
