import { z } from 'zod';
import { LANGUAGE_PATTERN, toLocalised } from '../../domain/localised-details.ts';
import { whenValid } from './common.ts';

/** An image is an http(s) URL, or '' for none. */
const imageUrl = z.union([z.literal(''), z.url({ protocol: /^https?$/, error: 'must be an http(s) URL or empty' }).max(2048)]).default('');
const noImages = { primaryImageUrl: '', secondaryImageUrl: '' };
const imagesInput = z.object({ primaryImageUrl: imageUrl, secondaryImageUrl: imageUrl }).default(noImages);

export const detailsBlockInput = z
  .object({
    title: z.string().trim().min(1).max(200),
    description: z.string().max(10_000).default(''),
    light: imagesInput.describe('images for a light theme; each defaults to empty'),
    dark: imagesInput.describe('images for a dark theme; each defaults to empty'),
  })
  .meta({ id: 'LocalisedDetailsBlockInput' });

/**
 * Details per language: `{"en": {...}, "fr": {...}}`, keys BCP 47 language tags, at least one, each once
 * (case-insensitively). The order given is kept: the first language is the last fallback on localised reads.
 */
export const localisedDetailsInput = z
  .record(z.string().max(35).regex(LANGUAGE_PATTERN, 'must be a language tag such as en or pt-BR'), detailsBlockInput)
  .superRefine((map, ctx) => {
    const languages = Object.keys(map);
    if (languages.length === 0) ctx.addIssue({ code: 'custom', message: 'needs details in at least one language' });
    if (languages.length > 50) ctx.addIssue({ code: 'custom', message: 'at most 50 languages' });
    const lower = languages.map((language) => language.toLowerCase());
    lower.forEach((language, i) => {
      if (lower.indexOf(language) !== i) ctx.addIssue({ code: 'custom', path: [languages[i]!], message: 'this language is given twice' });
    });
  }, whenValid)
  .transform(toLocalised)
  .meta({ id: 'LocalisedDetailsInput' });

const images = z.object({ primaryImageUrl: z.string(), secondaryImageUrl: z.string() });

export const detailsBlockSchema = z
  .object({ title: z.string(), description: z.string(), light: images, dark: images })
  .meta({ id: 'LocalisedDetailsBlock', description: "The contract's details block" });

export const localisedDetailsSchema = z
  .record(z.string(), detailsBlockSchema)
  .meta({ id: 'LocalisedDetails', description: 'Details per language tag, in the order they were given' });

export const languageHeader = {
  name: 'x-language',
  description:
    "Language of the returned details (a tag such as en or pt-BR). Falls back to its primary subtag (fr-CA → fr), then to the organisation's default language, then to the first language the record has",
};
