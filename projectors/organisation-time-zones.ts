import type { Kysely } from 'kysely';
import type { OrganisationEvent } from '../domain/organisation.ts';
import { withTableTypes, type UntypedDb } from '../infra/database.ts';
import type { Recorded } from './projection.ts';

/**
 * The organisations' time zones, as a read model or process manager that needs them keeps its own copy (a
 * read model only reads its own tables, so a rebuild depends on nothing else). Each one names its table.
 */
export const TIME_ZONE_EVENTS = ['OrganisationCreated', 'OrganisationSettingsChanged'] as const;

export type TimeZoneEvent = Extract<OrganisationEvent, { type: (typeof TIME_ZONE_EVENTS)[number] }>;

/** The row of a time zone table: declare `{ [table]: TimeZoneRow }` among the owner's tables. */
export interface TimeZoneRow {
  id: string;
  time_zone: string;
}

export async function createTimeZoneTable(db: Kysely<unknown>, table: string): Promise<void> {
  await db.schema
    .createTable(table)
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('time_zone', 'text', (c) => c.notNull())
    .execute();
}

export function isTimeZoneEvent(event: { type: string }): event is Recorded<TimeZoneEvent> {
  return (TIME_ZONE_EVENTS as readonly string[]).includes(event.type);
}

/**
 * A batch's view of the time zones: loads those of the organisations the batch names in one query, follows
 * the batch's own changes in log order (a fact after a change of zone in the same batch sees the new zone),
 * and writes what changed in one statement. UTC until the organisation is known.
 */
export class BatchTimeZones {
  private readonly changed = new Map<string, string>();
  /** The organisations whose rows were asked for (a row may not exist: UTC). */
  private readonly asked = new Set<string>();

  private constructor(
    private readonly db: Kysely<Record<string, TimeZoneRow>>,
    private readonly table: string,
    private readonly zones: Map<string, string>,
  ) {}

  /** The zones of `organisationIds` read elsewhere (`rows`: those that have one), as `load` would have read them. */
  static of(db: UntypedDb, table: string, organisationIds: Iterable<string>, rows: Iterable<TimeZoneRow>): BatchTimeZones {
    const zones = new BatchTimeZones(withTableTypes<Record<string, TimeZoneRow>>(db), table, new Map());
    for (const id of organisationIds) zones.asked.add(id);
    for (const row of rows) zones.zones.set(row.id, row.time_zone);
    return zones;
  }

  static async load(db: UntypedDb, table: string, organisationIds: Iterable<string>): Promise<BatchTimeZones> {
    const zones = new BatchTimeZones(withTableTypes<Record<string, TimeZoneRow>>(db), table, new Map());
    await zones.ensure(organisationIds);
    return zones;
  }

  /**
   * Reads the zones of those organisations the batch has neither read nor followed yet (one query, none when
   * there are none): a batch that needs zones for only some of its facts reads them when it knows which.
   */
  async ensure(organisationIds: Iterable<string>): Promise<void> {
    const ids: string[] = [];
    for (const id of organisationIds) {
      if (this.zones.has(id) || this.asked.has(id)) continue;
      this.asked.add(id);
      ids.push(id);
    }
    if (ids.length === 0) return;
    const rows = await this.db.selectFrom(this.table).select(['id', 'time_zone']).where('id', 'in', ids).execute();
    // A zone followed meanwhile is later in the log than the row: it stays.
    for (const row of rows) if (!this.zones.has(row.id)) this.zones.set(row.id, row.time_zone);
  }

  /** Follows a time zone event (in log order with the facts that use it). */
  record(event: Recorded<TimeZoneEvent>): void {
    this.zones.set(event.data.organisationId, event.data.timezone);
    this.changed.set(event.data.organisationId, event.data.timezone);
  }

  of(organisationId: string): string {
    return this.zones.get(organisationId) ?? 'UTC';
  }

  /** Writes the batch's changes: one multi-row upsert. */
  async save(): Promise<void> {
    if (this.changed.size === 0) return;
    await this.db
      .insertInto(this.table)
      .values([...this.changed].map(([id, time_zone]) => ({ id, time_zone })))
      .onConflict((oc) => oc.column('id').doUpdateSet((eb) => ({ time_zone: eb.ref('excluded.time_zone') })))
      .execute();
    this.changed.clear();
  }
}
