import { z } from 'zod';
import { NO_REDEEMABLE, REWARD_KINDS } from '../../domain/reward.ts';
import { pagination } from '../../infra/http/pagination.ts';
import { dateTime, hexId, whenValid } from './common.ts';
import { MAX_ALLOCATION_UNITS } from './distribution.ts';
import { localisedDetailsInput, localisedDetailsSchema } from './localised-details.ts';

/** Ids are stored lower-case, so a filter or a join matches however the client spelled them. */
const id = hexId.transform((value) => value.toLowerCase());

const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http or https URL' });
const labels = z.array(z.string().trim().min(1).max(100)).max(100);

const additionalInformation = z.strictObject({
  variableConfigId: id,
  required: z.boolean().default(false),
  position: z.number().int().min(0),
});

const optionalText = (max: number) => z.string().max(max).nullable().default(null);

const notAPhoneNumber = 'must be a phone number: digits, spaces, ( ) . - and an optional leading +';

const redeemableInput = z
  .strictObject({
    additionalInformation: z.array(additionalInformation).max(50).default([]).describe('user variables to collect when redeeming'),
    content: optionalText(10_000),
    instructions: optionalText(10_000),
    instructionsImageUrl: httpUrl.max(2048).nullable().default(null),
    supportUrl: httpUrl.max(2048).nullable().default(null),
    supportEmail: z.email().max(320).nullable().default(null),
    supportPhoneNumber: z
      .string()
      .max(32, { error: notAPhoneNumber, abort: true })
      .regex(/^\+?[0-9][0-9 ().-]{2,30}$/, notAPhoneNumber)
      .nullable()
      .default(null),
    redeemByDate: dateTime.nullable().default(null).describe('the last moment an asset can be redeemed'),
  })
  .meta({ id: 'RedeemableInput', description: 'Every field is optional; absent ones are null.' });

const common = {
  communityId: id,
  details: localisedDetailsInput,
  tags: labels.default([]),
  campaigns: labels.default([]),
  additionalCommunityIds: z.array(id).max(100).default([]),
  metadata: z
    .record(z.string().max(100), z.unknown())
    .refine((metadata) => Object.keys(metadata).length <= 100, 'at most 100 keys')
    .default({})
    .describe('free-form object, returned as given: at most 100 keys of at most 100 characters'),
};

/** In the future by the service's clock: the decider checks it, so a test clock decides too. */
const futureDraw = dateTime;

const createEntriesReward = z.strictObject({
  kind: z.literal('entries'),
  ...common,
  drawsAt: futureDraw.describe('when the winners are drawn; in the future'),
  supply: z.number().int().min(1).max(1_000_000).describe('number of winners; each gets one reward asset'),
});

const createAssetReward = z.strictObject({
  kind: z.literal('asset'),
  ...common,
  redeemable: redeemableInput.default(NO_REDEEMABLE),
  codes: z
    .array(z.string().trim().min(1).max(500))
    .min(1)
    .max(10_000)
    .superRefine((codes, ctx) => {
      const seen = new Set<string>();
      codes.forEach((code, index) => {
        if (seen.has(code)) ctx.addIssue({ code: 'custom', path: [index], message: 'duplicate code' });
        seen.add(code);
      });
    }, whenValid)
    .nullable()
    .default(null)
    .describe('unique codes, one per asset handed out; allocations may not supply more assets than there are codes'),
  expiresAt: dateTime.nullable().default(null),
});

export const createRewardBody = z.discriminatedUnion('kind', [createEntriesReward, createAssetReward]).meta({
  id: 'CreateReward',
  description:
    'An entries reward (a giveaway drawn at `drawsAt`, with `supply` winners) or an asset reward (content or codes a user claims and redeems). Unknown fields are a 400.',
});

export type CreateRewardBody = z.infer<typeof createRewardBody>;

export const updateRewardBody = z
  .strictObject({
    details: localisedDetailsInput.optional().describe('replaces every language'),
    tags: labels.optional(),
    drawsAt: futureDraw.optional().describe('entries rewards only; refused with 409 once the draw is due or done'),
    expiresAt: dateTime.nullable().optional().describe('asset rewards only; null removes it'),
  })
  .refine((body) => Object.keys(body).length > 0, 'nothing to change: send details, tags, drawsAt or expiresAt')
  .meta({
    id: 'UpdateReward',
    description: 'Changes only the fields sent. `drawsAt` on an asset reward or `expiresAt` on an entries reward is a 400.',
  });

export const listRewardsQuery = pagination.extend({
  kind: z.enum(REWARD_KINDS).optional(),
  communityId: id.optional(),
});

export const createAllocationBody = z
  .strictObject({
    supply: z.number().int().min(0).max(MAX_ALLOCATION_UNITS).describe('how many units can ever be distributed'),
    amountToDistribute: z.number().int().min(1).max(MAX_ALLOCATION_UNITS).default(1).describe('units given per distribution'),
  })
  .meta({ id: 'CreateRewardAllocation' });

export const redeemableOutput = z
  .object({
    additionalInformation: z.array(z.object({ variableConfigId: z.string(), required: z.boolean(), position: z.number() })),
    content: z.string().nullable(),
    instructions: z.string().nullable(),
    instructionsImageUrl: z.string().nullable(),
    supportUrl: z.string().nullable(),
    supportEmail: z.string().nullable(),
    supportPhoneNumber: z.string().nullable(),
    redeemByDate: z.string().nullable(),
  })
  .meta({ id: 'Redeemable' });

const rewardCommonOutput = {
  id: hexId,
  organisationId: hexId,
  communityId: hexId,
  details: localisedDetailsSchema,
  tags: z.array(z.string()),
  campaigns: z.array(z.string()),
  additionalCommunityIds: z.array(z.string()),
  metadata: z.record(z.string(), z.unknown()),
  createdAt: z.string(),
  updatedAt: z.string(),
  createdBy: z.string().describe('id of the API token that created it'),
  updatedBy: z.string().describe('id of the API token that last changed it'),
};

export const rewardSchema = z
  .discriminatedUnion('kind', [
    z.object({ kind: z.literal('entries'), ...rewardCommonOutput, drawsAt: z.string(), supply: z.number() }),
    z.object({
      kind: z.literal('asset'),
      ...rewardCommonOutput,
      redeemable: redeemableOutput,
      codeCount: z.number().nullable().describe('how many codes the reward holds (null: no codes); the codes themselves are never returned'),
      expiresAt: z.string().nullable(),
    }),
  ])
  .meta({ id: 'Reward' });
