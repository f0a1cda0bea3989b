import { z } from 'zod';
import { freshDistributionView } from '../../domain/distribution-entry.ts';
import { GAME_TYPE_PATTERN, type GameDistribution, type GameRecord } from '../../domain/game.ts';
import { fromLocalised } from '../../domain/localised-details.ts';
import { hexId, whenValid } from './common.ts';
import { distributionWithIds, refineUniqueAllocationIds } from './distribution-assignment.ts';
import { distributionOutput } from './distribution.ts';
import { localisedDetailsInput, localisedDetailsSchema } from './localised-details.ts';

export const createGameBody = z
  .object({
    name: z.string().trim().min(1).max(200),
    type: z.string().max(50).regex(GAME_TYPE_PATTERN, 'must be a lowercase slug such as spin-the-wheel').describe('the kind of game, a lowercase slug'),
    communityId: hexId
      .transform((id) => id.toLowerCase())
      .nullable()
      .optional()
      .describe('the community the game belongs to; absent or null: the whole organisation'),
    details: localisedDetailsInput,
  })
  .meta({ id: 'CreateGame' });

export const gameDistributionBody = z
  .strictObject({
    distributions: z.array(distributionWithIds).min(1).max(100).describe("replaces the game's whole set of prizes; each gets a new id"),
  })
  .superRefine(
    (body, ctx) => refineUniqueAllocationIds(body.distributions, ctx, (i, j) => ['distributions', i, 'rewardsConfig', 'allocations', j, 'id']),
    whenValid,
  )
  .meta({ id: 'AssignGameDistributions' });

export const gameDistributionSchema = distributionOutput.extend({ id: hexId }).meta({ id: 'GameDistribution' });

export const gameDistributionsResponse = z.object({ gameConfigId: hexId, distributions: z.array(gameDistributionSchema) }).meta({ id: 'GameDistributions' });

export const gameConfigSchema = z
  .object({
    id: hexId,
    organisationId: hexId,
    communityId: hexId.nullable(),
    name: z.string(),
    type: z.string(),
    details: localisedDetailsSchema,
    distributions: z.array(gameDistributionSchema),
    createdAt: z.string(),
    updatedAt: z.string(),
    createdBy: z.string().describe('id of the API token that created it'),
    updatedBy: z.string().describe('id of the API token that last changed it'),
  })
  .meta({ id: 'GameConfig' });

export type GameDistributionView = z.infer<typeof gameDistributionSchema>;

export function gameDistributionView(distribution: GameDistribution): GameDistributionView {
  return { id: distribution.id, ...freshDistributionView(distribution) };
}

/** A game config as the admin API shows it. */
export function gameView(record: GameRecord): z.infer<typeof gameConfigSchema> {
  return {
    id: record.gameId,
    organisationId: record.organisationId,
    communityId: record.communityId,
    name: record.name,
    type: record.type,
    details: fromLocalised(record.details),
    distributions: record.distributions.map(gameDistributionView),
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    createdBy: record.createdBy,
    updatedBy: record.updatedBy,
  };
}
