import type { CommunityEvent } from '../domain/community.ts';
import type { LegacyProjection as Projection } from './legacy.ts';

/** Communities as the admin API shows them. */
export const communitiesProjection: Projection = {
  name: 'communities',
  version: 1,
  tables: ['communities'],
  filter: { categories: ['community'] },
  migrations: {
    '0001_communities': {
      async up(db) {
        await db.schema
          .createTable('communities')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('description', 'text')
          .addColumn('details', 'jsonb', (c) => c.notNull())
          .addColumn('created_at', 'timestamptz', (c) => c.notNull())
          .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
          .addColumn('created_by', 'text', (c) => c.notNull())
          .addColumn('updated_by', 'text', (c) => c.notNull())
          .execute();
        // The admin list: one organisation, newest first, id as the tie-break.
        await db.schema.createIndex('communities_by_organisation').on('communities').columns(['organisation_id', 'created_at desc', 'id desc']).execute();
      },
    },
  },

  async apply(db, event) {
    const { type, data } = event as unknown as CommunityEvent;
    switch (type) {
      case 'CommunityCreated':
        await db
          .insertInto('communities')
          .values({
            id: data.communityId,
            organisation_id: data.organisationId,
            name: data.name,
            description: data.description,
            details: JSON.stringify(data.details),
            created_at: data.createdAt,
            updated_at: data.createdAt,
            created_by: data.createdBy,
            updated_by: data.createdBy,
          })
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
        return;
      case 'CommunityUpdated': {
        const { name, description, details } = data.changes;
        await db
          .updateTable('communities')
          .set({
            ...(name !== undefined ? { name } : {}),
            ...(description !== undefined ? { description } : {}),
            ...(details !== undefined ? { details: JSON.stringify(details) } : {}),
            updated_at: data.updatedAt,
            updated_by: data.updatedBy,
          })
          .where('id', '=', data.communityId)
          .execute();
        return;
      }
    }
  },
};
