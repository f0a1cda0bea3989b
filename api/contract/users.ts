import { z } from 'zod';
import { pagination } from '../../infra/http/pagination.ts';
import { hexId, whenValid } from './common.ts';
import { languageCode } from './communities.ts';

const text = (max: number) => z.string().trim().min(1).max(max);
const email = z.email().max(320);
const url = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).max(2048);
const birthYear = z
  .number()
  .int()
  .min(1900)
  .refine((year) => year <= new Date().getUTCFullYear(), { error: 'must not be in the future' });
const handle = text(100).nullable();

const profileFields = {
  username: text(100).nullable(),
  displayName: text(200).nullable(),
  email: email.nullable(),
  emailVerified: z.boolean().describe('true marks the e-mail address verified now; false marks it unverified. Changing the address unverifies it'),
  fullName: text(200).nullable(),
  parentEmail: email.nullable(),
  locale: languageCode.nullable(),
  bio: z.string().max(2000).nullable(),
  profilePictureUrl: url.nullable(),
  roles: z.array(text(100)).max(50).describe('free strings; duplicates are dropped'),
  birthDay: z.number().int().min(1).max(31).nullable(),
  birthMonth: z.number().int().min(1).max(12).nullable(),
  birthYear: birthYear.nullable(),
  communityIds: z.array(hexId).max(100).describe('communities of this organisation the user belongs to; each must exist (else 400)'),
};

export const createUserBody = z
  .object({
    externalUserId: text(200).describe("the client's own id for the user; unique per organisation (409 if taken)"),
    username: profileFields.username.default(null),
    displayName: profileFields.displayName.default(null),
    email: profileFields.email.default(null),
    emailVerified: profileFields.emailVerified.default(false),
    fullName: profileFields.fullName.default(null),
    parentEmail: profileFields.parentEmail.default(null),
    locale: profileFields.locale.default(null),
    bio: profileFields.bio.default(null),
    profilePictureUrl: profileFields.profilePictureUrl.default(null),
    roles: profileFields.roles.default([]),
    birthDay: profileFields.birthDay.default(null),
    birthMonth: profileFields.birthMonth.default(null),
    birthYear: profileFields.birthYear.default(null),
    socialHandles: z
      .object({ instagram: handle.default(null), loyaltyCardNumber: handle.default(null), tiktok: handle.default(null) })
      .strict()
      .default({ instagram: null, loyaltyCardNumber: null, tiktok: null }),
    communityIds: profileFields.communityIds.default([]),
  })
  .strict()
  .meta({
    id: 'CreateUser',
    description: 'Fields left out are null (lists empty). birthDay must exist in birthMonth (29 February is allowed without a year).',
  });

export const updateUserBody = z
  .object({
    username: profileFields.username.optional(),
    displayName: profileFields.displayName.optional(),
    email: profileFields.email.optional(),
    emailVerified: profileFields.emailVerified.optional(),
    fullName: profileFields.fullName.optional(),
    parentEmail: profileFields.parentEmail.optional(),
    locale: profileFields.locale.optional(),
    bio: profileFields.bio.optional(),
    profilePictureUrl: profileFields.profilePictureUrl.optional(),
    roles: profileFields.roles.optional(),
    birthDay: profileFields.birthDay.optional(),
    birthMonth: profileFields.birthMonth.optional(),
    birthYear: profileFields.birthYear.optional(),
    socialHandles: z
      .object({ instagram: handle.optional(), loyaltyCardNumber: handle.optional(), tiktok: handle.optional() })
      .strict()
      .optional()
      .describe('merged per handle; null clears one'),
    communityIds: profileFields.communityIds.optional().describe('replaces the list; each must exist (else 400)'),
  })
  .strict()
  .refine((body) => Object.keys(body).length > 0, { error: 'give at least one field to change' })
  .meta({
    id: 'UpdateUser',
    description: 'Fields left out stay as they are; null clears a field. externalUserId cannot change. An update that changes nothing appends nothing.',
  });

const xpSchema = z
  .object({
    total: z.number(),
    knowledge: z.number(),
    creativity: z.number(),
    loyalty: z.number(),
    influence: z.number(),
    participation: z.number(),
    contribution: z.number(),
  })
  .meta({ id: 'XpBreakdown' });

export const teamMemberSchema = z
  .object({
    id: hexId,
    username: z.string().nullable(),
    displayName: z.string().nullable(),
    bio: z.string().nullable(),
    profilePictureUrl: z.string().nullable(),
    emailVerified: z.string().nullable().describe('ISO date-time the e-mail address was verified; null while unverified'),
    locale: z.string().nullable(),
    fullName: z.string().nullable(),
    parentEmail: z.string().nullable(),
    email: z.string().nullable(),
    organisationId: hexId,
    externalUserId: z.string(),
    createdAt: z.string(),
    updatedAt: z.string(),
    points: z.number(),
    keys: z.number(),
    xp: xpSchema,
    roles: z.array(z.string()),
    isAnonymous: z.boolean(),
    birthDay: z.number().nullable(),
    birthMonth: z.number().nullable(),
    birthYear: z.number().nullable(),
    socialHandles: z.object({ instagram: z.string().nullable(), loyaltyCardNumber: z.string().nullable(), tiktok: z.string().nullable() }),
    communityData: z.array(
      z.object({
        communityId: hexId,
        streak: z.object({
          currentStreak: z.number(),
          lastExtendedAt: z.string().nullable().describe('null until a streak is extended'),
          longestStreak: z.number(),
        }),
        challengesCompleted: z.number(),
        achievementsCompleted: z.number(),
        points: z.number(),
        xp: xpSchema,
        hasAcceptedRules: z.boolean(),
      }),
    ),
  })
  .meta({ id: 'TeamMember', description: 'Every field is present; optional profile fields are null when unknown' });

const variableValue = z.union([z.string().max(1000), z.number(), z.boolean()]);

export const setUserVariablesBody = z
  .object({
    values: z
      .array(z.object({ variableConfigId: hexId, value: variableValue.describe("must have the variable config's type") }).strict())
      .max(100)
      .superRefine((values, ctx) => {
        const seen = new Set<string>();
        values.forEach((entry, index) => {
          const id = entry.variableConfigId.toLowerCase();
          if (seen.has(id)) ctx.addIssue({ code: 'custom', path: [index, 'variableConfigId'], message: 'given more than once' });
          seen.add(id);
        });
      }, whenValid),
  })
  .strict()
  .meta({ id: 'SetUserVariables', description: "The user's variables become exactly these; an empty list clears them." });

export const userVariablesSchema = z
  .object({
    userId: hexId,
    values: z.array(z.object({ variableConfigId: hexId, value: variableValue })).describe('ordered by variableConfigId'),
  })
  .meta({ id: 'UserVariables' });

export const issueUserTokenBody = z
  .object({ expiresInSeconds: z.number().int().min(60).max(86_400).default(3600) })
  .strict()
  .meta({ id: 'IssueUserToken' });

export const userTokenSchema = z
  .object({
    token: z.string().describe('send as `Authorization: Bearer <token>` on the integration API'),
    expiresAt: z.string().describe('ISO date-time'),
  })
  .meta({ id: 'UserToken' });

export const listUsersQuery = pagination.extend({
  externalUserId: z.string().trim().min(1).max(200).optional().describe('exact match (trimmed, as stored): a page of zero or one user'),
});

export const teamsQuery = pagination.extend({
  communityId: hexId.optional().describe('members of this community (404 if the organisation has no such community)'),
  role: z.string().min(1).max(100).optional().describe('members with this role (exact match)'),
  search: z.string().trim().min(1).max(100).optional().describe('case-insensitive prefix of username, displayName or email'),
});
