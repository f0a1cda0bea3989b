import type { VariableConfigEvent } from '../domain/variable-config.ts';
import type { LegacyProjection as Projection } from './legacy.ts';

/** Variable configs as the admin API shows them. */
export const variableConfigsProjection: Projection = {
  name: 'variable_configs',
  version: 1,
  tables: ['variable_configs'],
  filter: { categories: ['variableconfig'] },
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

  async apply(db, event) {
    const { type, data } = event as unknown as VariableConfigEvent;
    switch (type) {
      case 'VariableConfigCreated':
        await db
          .insertInto('variable_configs')
          .values({
            id: data.variableConfigId,
            organisation_id: data.organisationId,
            key: data.key,
            type: data.type,
            description: data.description,
            created_at: data.createdAt,
            created_by: data.createdBy,
          })
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
        return;
    }
  },
};
