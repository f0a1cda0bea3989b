import type { Request } from 'express';
import { z } from 'zod';
import { LANGUAGE_PATTERN } from '../../domain/localised-details.ts';
import { badRequest } from '../../infra/http/errors.ts';
import { hexId } from './common.ts';
import { detailsBlockSchema } from './localised-details.ts';
import { redeemableOutput } from './rewards.ts';

/** The contract's reward asset: one unit of a reward a user got, to claim and then redeem. */
export const rewardAssetSchema = z
  .object({
    id: hexId,
    organisationId: hexId,
    communityId: hexId.describe('the community where it was earned'),
    rewardId: hexId,
    allocationId: hexId.nullable().describe('the allocation it was handed out from; null for a giveaway win'),
    userId: hexId,
    eventSourceId: z.string().describe('the event that earned it: the custom event, closed leaderboard window or giveaway draw'),
    details: detailsBlockSchema,
    tags: z.array(z.string()),
    campaigns: z.array(z.string()),
    additionalCommunityIds: z.array(z.string()),
    metadata: z.record(z.string(), z.unknown()),
    createdAt: z.string().describe('when it was granted'),
    updatedAt: z.string(),
    claimedAt: z.string().nullable().describe('null until the user claims it'),
    redeemedAt: z.string().nullable().describe('null until the user redeems it'),
    expiresAt: z.string().nullable().describe('from then on it can be neither claimed nor redeemed; null: never'),
    redeemable: redeemableOutput.describe("the reward's redeemable; `content` is this asset's own code when the reward has codes"),
  })
  .meta({ id: 'RewardAsset' });

export const rewardEntrySchema = z
  .object({
    id: hexId.describe('one per (reward, user)'),
    organisationId: hexId,
    communityId: hexId.describe('the community where the user first earned entries'),
    rewardId: hexId,
    userId: hexId,
    details: detailsBlockSchema.describe("the reward's details"),
    totalEntries: z.number().int().describe('the sum of `entries[].amount`: the weight of the user in the draw'),
    entries: z.array(z.object({ allocationId: hexId, amount: z.number().int(), createdAt: z.string() })).describe('one per hand-out, oldest first'),
    tags: z.array(z.string()).describe("the reward's"),
    campaigns: z.array(z.string()).describe("the reward's"),
    additionalCommunityIds: z.array(z.string()).describe("the reward's"),
    rewardAssetIds: z.array(hexId).describe('the assets the user won in the draw'),
    createdAt: z.string().describe('the first hand-out'),
    updatedAt: z.string(),
    checkByDate: z.string().nullable().describe("when the draw happens (the reward's `drawsAt`)"),
    checkedAt: z.string().nullable().describe('when the entries were checked in the draw; null before the draw'),
    drawnAt: z.string().nullable().describe('when the draw happened; null before it'),
    rewardAssets: z.array(rewardAssetSchema).describe("the user's assets from this reward (what the draw gave them)"),
  })
  .meta({ id: 'RewardEntry' });

export const redeemRewardAssetBody = z
  .strictObject({
    information: z
      .array(z.strictObject({ variableConfigId: hexId.transform((id) => id.toLowerCase()), value: z.string().max(2000) }))
      .max(50)
      .default([])
      .describe("values of the variables the reward's `redeemable.additionalInformation` asks for; every `required` one must be given, not blank"),
  })
  .meta({ id: 'RedeemRewardAsset' });

export const userTokenHeader = {
  name: 'Authorization',
  description: '`Bearer <user token>`, issued by the admin API (`POST /users/{userId}/tokens`); missing, invalid, expired or another organisation’s → 401',
  required: true,
};

/** `x-language`, when sent, must be a language tag (400 otherwise). */
export function requestedLanguage(req: Request): string | undefined {
  const language = req.get('x-language');
  if (language !== undefined && !LANGUAGE_PATTERN.test(language)) {
    throw badRequest([{ message: 'x-language: must be a language tag such as en or pt-BR', path: ['x-language'] }]);
  }
  return language;
}
