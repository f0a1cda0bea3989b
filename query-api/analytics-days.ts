import type { Request } from 'express';
import type { Kysely, SelectQueryBuilder, Transaction } from 'kysely';
import { DateTime } from 'luxon';
import { LANGUAGE_PATTERN } from '../domain/localised-details.ts';
import { localDate } from '../domain/windows.ts';
import { badRequest } from '../infra/http/errors.ts';
import type { OrganisationTables } from '../projectors/organisations.ts';

/** What the analytics routes share: the organisation's settings, its local days, the wanted language. */

export interface OrganisationSettings {
  timeZone: string;
  defaultLanguage: string | undefined;
}

/** A range of local dates (`YYYY-MM-DD`), both ends included; null: unbounded on that side. */
export interface Days {
  from: string | null;
  to: string | null;
}

export async function organisationSettings(db: Kysely<OrganisationTables>, organisationId: string): Promise<OrganisationSettings> {
  const row = await db.selectFrom('organisations').select(['timezone', 'default_language']).where('id', '=', organisationId).executeTakeFirst();
  return { timeZone: row?.timezone ?? 'UTC', defaultLanguage: row?.default_language };
}

/** `from` and `to` as local days: a date is itself, a date-time its day in `timeZone`. `from` after `to` → 400. */
export function localDays(range: { from?: string | undefined; to?: string | undefined }, timeZone: string): Days {
  const day = (value: string | undefined) => (value === undefined ? null : /^\d{4}-\d{2}-\d{2}$/.test(value) ? value : localDate(value, timeZone));
  const days = { from: day(range.from), to: day(range.to) };
  if (days.from !== null && days.to !== null && days.from > days.to) {
    throw badRequest([{ message: `to: the range ends (${days.to}) before it starts (${days.from})`, path: ['to'] }]);
  }
  return days;
}

/** The instant a local day starts at. */
export function startOfDay(day: string, timeZone: string): string {
  return DateTime.fromISO(day, { zone: timeZone }).toUTC().toISO()!;
}

/** The local day after `day`. */
export function dayAfter(day: string): string {
  return DateTime.fromISO(day, { zone: 'UTC' }).plus({ days: 1 }).toISODate()!;
}

/** The `x-language` header, checked: a malformed tag is a 400. */
export function wantedLanguage(req: Request): string | undefined {
  const language = req.get('x-language');
  if (language !== undefined && !LANGUAGE_PATTERN.test(language)) {
    throw badRequest([{ message: 'x-language: must be a language tag such as en or pt-BR', path: ['x-language'] }]);
  }
  return language;
}

/** Several reads that must agree with one another (a total and its breakdown): one snapshot, read only. */
export function inOneSnapshot<DB, T>(db: Kysely<DB>, read: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  return db.transaction().setIsolationLevel('repeatable read').setAccessMode('read only').execute(read);
}

/** A count or sum as PostgreSQL returns it (bigint and numeric come back as strings; null for no rows). */
export function count(value: unknown): number {
  return value === null || value === undefined ? 0 : Number(value);
}

/** Rows of a per-day read model whose `day` is in the range. */
export function withinDays<Query extends SelectQueryBuilder<any, any, any>>(query: Query, days: Days): Query {
  let within = query;
  if (days.from !== null) within = within.where('day', '>=', days.from) as Query;
  if (days.to !== null) within = within.where('day', '<=', days.to) as Query;
  return within;
}

export const unbounded = (days: Days) => days.from === null && days.to === null;
