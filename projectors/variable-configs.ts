import type { VariableConfigEvent, VariableType } from '../domain/variable-config.ts';
import type { Insertable } from 'kysely';
import type { Timestamp } from './columns.ts';
import { defineProjection } from './projection.ts';

export interface VariableConfigRow {
  id: string;
  organisation_id: string;
  key: string;
  type: VariableType;
  description: string | null;
  created_at: Timestamp;
  created_by: string;
}

export interface VariableConfigTables {
  variable_configs: VariableConfigRow;
}

/** Variable configs as the admin API shows them. */
export const variableConfigsProjection = defineProjection<VariableConfigTables, VariableConfigEvent>({
  name: 'variable_configs',
  version: 1,
  tables: ['variable_configs'],
  canHandle: ['VariableConfigCreated'],
  migrations: {
    '0001_variable_configs': {
      async up(db) {
        await db.schema
          .createTable('variable_configs')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('key', 'text', (c) => c.notNull())
          .addColumn('type', 'text', (c) => c.notNull())
          .addColumn('description', 'text')
          .addColumn('created_at', 'timestamptz', (c) => c.notNull())
          .addColumn('created_by', 'text', (c) => c.notNull())
          .execute();
        await db.schema
          .createIndex('variable_configs_by_organisation')
          .on('variable_configs')
          .columns(['organisation_id', 'created_at desc', 'id desc'])
          .execute();
      },
    },
  },

  /** A config is written once: the batch's new ones in one insert (the first event of an id wins, as before). */
  async apply(db, events) {
    const created = new Map<string, Insertable<VariableConfigRow>>();
    for (const { data } of events) {
      if (created.has(data.variableConfigId)) continue;
      created.set(data.variableConfigId, {
        id: data.variableConfigId,
        organisation_id: data.organisationId,
        key: data.key,
        type: data.type,
        description: data.description,
        created_at: data.createdAt,
        created_by: data.createdBy,
      });
    }
    const rows = [...created.values()];
    for (let start = 0; start < rows.length; start += 5000) {
      await db
        .insertInto('variable_configs')
        .values(rows.slice(start, start + 5000))
        .onConflict((oc) => oc.column('id').doNothing())
        .execute();
    }
  },
});
