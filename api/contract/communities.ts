import { z } from 'zod';
import { LANGUAGE_PATTERN } from '../../domain/localised-details.ts';
import { VARIABLE_KEY_PATTERN, VARIABLE_TYPES } from '../../domain/variable-config.ts';
import { hexId } from './common.ts';
import { detailsBlockInput, detailsBlockSchema } from './localised-details.ts';

/** A BCP 47 language tag such as `en`, `nl` or `pt-BR`. */
export const languageCode = z.string().regex(LANGUAGE_PATTERN, 'must be a language tag such as en or pt-BR').max(35);

const MAX_LANGUAGES = 50;
const tooManyLanguages = { error: `at most ${MAX_LANGUAGES} languages` };

export const createCommunityBody = z
  .object({
    name: z.string().trim().min(1).max(200),
    description: z.string().max(5000).nullable().default(null),
    details: z
      .record(languageCode, detailsBlockInput)
      .refine((details) => Object.keys(details).length <= MAX_LANGUAGES, tooManyLanguages)
      .default({})
      .describe('Localised content: language tag → details block'),
  })
  .strict()
  .meta({ id: 'CreateCommunity' });

export const updateCommunityBody = z
  .object({
    name: z.string().trim().min(1).max(200).optional(),
    description: z.string().max(5000).nullable().optional(),
    details: z
      .record(languageCode, detailsBlockInput.nullable())
      .refine((details) => Object.keys(details).length <= MAX_LANGUAGES, tooManyLanguages)
      .optional()
      .describe('Per language: a block replaces that language, null removes it; languages not named stay as they are'),
  })
  .strict()
  .refine((body) => Object.keys(body).length > 0, { error: 'give at least one field to change' })
  .meta({ id: 'UpdateCommunity', description: 'Fields left out stay as they are. An update that changes nothing appends nothing.' });

export const communitySchema = z
  .object({
    id: hexId,
    organisationId: hexId,
    name: z.string(),
    description: z.string().nullable(),
    details: z.record(z.string(), detailsBlockSchema).describe('language tag → details block'),
    createdAt: z.string(),
    updatedAt: z.string(),
    createdBy: z.string().describe('id of the API token that created it'),
    updatedBy: z.string().describe('id of the API token that last changed it'),
  })
  .meta({ id: 'Community' });

const notAVariableKey = 'a letter, then letters, digits, "_", "-" or "."; at most 64 characters';

export const variableConfigBody = z
  .object({
    key: z
      .string()
      .max(64, { error: notAVariableKey, abort: true })
      .regex(VARIABLE_KEY_PATTERN, notAVariableKey)
      .describe('unique per organisation, case-insensitively'),
    type: z.enum(VARIABLE_TYPES),
    description: z.string().max(2000).nullable().default(null),
  })
  .strict()
  .meta({ id: 'CreateVariableConfig' });

export const variableConfigSchema = z
  .object({
    id: hexId,
    organisationId: hexId,
    key: z.string(),
    type: z.enum(VARIABLE_TYPES),
    description: z.string().nullable(),
    createdAt: z.string(),
    createdBy: z.string().describe('id of the API token that created it'),
  })
  .meta({ id: 'VariableConfig' });
