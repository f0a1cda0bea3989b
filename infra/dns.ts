import { resolveTxt } from 'node:dns/promises';

/** Looks up the TXT records of a name: each record is the list of its character strings. Tests inject a map. */
export type TxtResolver = (name: string) => Promise<string[][]>;

/** The system resolver; a name without TXT records (or without any record) is an empty answer, not an error. */
export const systemTxtResolver: TxtResolver = async (name) => {
  try {
    return await resolveTxt(name);
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'ENOTFOUND' || code === 'ENODATA') return [];
    throw error;
  }
};

/** A resolver over fixed answers, for tests and local set-ups. */
export function mapTxtResolver(records: Map<string, string[]>): TxtResolver {
  return (name) => Promise.resolve((records.get(name) ?? []).map((value) => [value]));
}
