/** The contract's details block, kept per language. Shared by challenges, actions and games. */
export interface Images {
  primaryImageUrl: string;
  secondaryImageUrl: string;
}

export interface DetailsBlock {
  title: string;
  description: string;
  light: Images;
  dark: Images;
}

/**
 * Details per language, in the order the client gave them. A list rather than a map because the event
 * store and read models keep JSON as JSONB, which does not keep key order, and "the first language
 * present" is the last fallback when picking one.
 */
export type LocalisedDetails = ({ language: string } & DetailsBlock)[];

/** A BCP 47-style language tag: `en`, `fr`, `pt-BR`, `zh-Hant`. */
export const LANGUAGE_PATTERN = /^[a-zA-Z]{2,3}(-[a-zA-Z0-9]{2,8})*$/;

export function toLocalised(map: Record<string, DetailsBlock>): LocalisedDetails {
  return Object.entries(map).map(([language, block]) => ({ language, ...block }));
}

export function fromLocalised(details: LocalisedDetails): Record<string, DetailsBlock> {
  return Object.fromEntries(details.map(({ language, ...block }) => [language, block]));
}

/** What is wrong with a set of localised details, if anything: none, a bad tag, or one language twice. */
export function localisedDetailsProblem(details: LocalisedDetails): string | null {
  if (details.length === 0) return 'needs details in at least one language';
  const seen = new Set<string>();
  for (const { language, title } of details) {
    if (!LANGUAGE_PATTERN.test(language)) return `"${language}" is not a language tag such as en or pt-BR`;
    if (seen.has(language.toLowerCase())) return `language "${language}" is given twice`;
    if (title.trim().length === 0) return `the ${language} title is empty`;
    seen.add(language.toLowerCase());
  }
  return null;
}

/**
 * The block to show: the wanted language (exactly, else its primary subtag, `fr-CA` → `fr`), else the
 * organisation's default language, else the first language present. Tags compare case-insensitively.
 */
export function pickDetails(details: LocalisedDetails, wanted: string | undefined, organisationDefault: string | undefined): DetailsBlock {
  const find = (tag: string | undefined) => (tag === undefined ? undefined : details.find((d) => d.language.toLowerCase() === tag.toLowerCase()));
  const chosen = find(wanted) ?? find(wanted?.split('-')[0]) ?? find(organisationDefault) ?? details[0];
  if (!chosen)
    return { title: '', description: '', light: { primaryImageUrl: '', secondaryImageUrl: '' }, dark: { primaryImageUrl: '', secondaryImageUrl: '' } };
  const { language: _language, ...block } = chosen;
  return block;
}
