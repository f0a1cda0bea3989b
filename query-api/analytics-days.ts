import type { Request } from 'express';
import { sql, type Kysely, type SelectQueryBuilder, type Transaction } from 'kysely';
import { DateTime } from 'luxon';
import { LANGUAGE_PATTERN } from '../domain/localised-details.ts';
import { localDate } from '../domain/windows.ts';
import { withTableTypes } from '../infra/database.ts';
import { badRequest } from '../infra/http/errors.ts';

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

/**
 * The columns of `organisations` the analytics routes read. The table belongs to the organisations read model
 * (projectors/organisations.ts); only what is read here is declared.
 */
export interface OrganisationSettingsTables {
  organisations: { id: string; timezone: string; default_language: string };
}

export async function organisationSettings<Tables extends OrganisationSettingsTables>(
  db: Kysely<Tables>,
  organisationId: string,
): Promise<OrganisationSettings> {
  // Any read side's tables that include these columns: typed here as just these.
  const row = await withTableTypes<OrganisationSettingsTables>(db)
    .selectFrom('organisations')
    .select(['timezone', 'default_language'])
    .where('id', '=', organisationId)
    .executeTakeFirst();
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
export function inOneSnapshot<Tables, T>(db: Kysely<Tables>, read: (trx: Transaction<Tables>) => Promise<T>): Promise<T> {
  return db.transaction().setIsolationLevel('repeatable read').setAccessMode('read only').execute(read);
}

/** A count or sum as PostgreSQL returns it (bigint and numeric come back as strings; null for no rows). */
export function count(value: unknown): number {
  return value === null || value === undefined ? 0 : Number(value);
}

/** Rows of a per-day read model (a `day` column, `YYYY-MM-DD`) whose `day` is in the range. */
export function withinDays<Table extends string, Tables extends Record<Table, { day: string }>, Row>(
  query: SelectQueryBuilder<Tables, Table, Row>,
  days: Days,
): SelectQueryBuilder<Tables, Table, Row> {
  let within = query;
  if (days.from !== null) within = within.where(sql<boolean>`${sql.ref('day')} >= ${days.from}`);
  if (days.to !== null) within = within.where(sql<boolean>`${sql.ref('day')} <= ${days.to}`);
  return within;
}

export const unbounded = (days: Days) => days.from === null && days.to === null;
