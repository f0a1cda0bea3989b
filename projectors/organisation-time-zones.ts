import type { Kysely } from 'kysely';
import type { OrganisationEvent } from '../domain/organisation.ts';
import type { RecordedEvent } from '../infra/event-store/port.ts';
import { forgetInBatch, perBatch } from './batch-cache.ts';

/**
 * The organisations' time zones, as a projection that needs them keeps its own copy (a read model only
 * reads its own tables, so a rebuild depends on nothing else). Each projection names its table.
 */
export const TIME_ZONE_EVENTS = ['OrganisationCreated', 'OrganisationSettingsChanged'] as const;

export async function createTimeZoneTable(db: Kysely<any>, table: string): Promise<void> {
  await db.schema
    .createTable(table)
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('time_zone', 'text', (c) => c.notNull())
    .execute();
}

export async function recordTimeZone(db: Kysely<any>, table: string, event: RecordedEvent): Promise<void> {
  const { organisationId, timezone } = (event as unknown as Extract<OrganisationEvent, { type: (typeof TIME_ZONE_EVENTS)[number] }>).data;
  await db
    .insertInto(table)
    .values({ id: organisationId, time_zone: timezone })
    .onConflict((oc) => oc.column('id').doUpdateSet({ time_zone: timezone }))
    .execute();
  forgetInBatch(db, `${table}:${organisationId}`);
}

/** UTC until the organisation is known. Read once per batch. */
export function timeZoneOf(db: Kysely<any>, table: string, organisationId: string): Promise<string> {
  return perBatch(db, `${table}:${organisationId}`, async () => {
    const row = await db.selectFrom(table).select('time_zone').where('id', '=', organisationId).executeTakeFirst();
    return (row?.time_zone as string | undefined) ?? 'UTC';
  });
}
