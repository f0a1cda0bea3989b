import type { CommunityEvent, LocalisedDetails } from '../domain/community.ts';
import type { Held, Json, Timestamp } from './columns.ts';
import { defineProjection } from './projection.ts';
import { RowBatch } from './row-batch.ts';

export interface CommunityRow {
  id: string;
  organisation_id: string;
  name: string;
  description: string | null;
  details: Json<LocalisedDetails>;
  created_at: Timestamp;
  updated_at: Timestamp;
  created_by: string;
  updated_by: string;
}

export interface CommunityTables {
  communities: CommunityRow;
}

/** Communities as the admin API shows them. */
export const communitiesProjection = defineProjection<CommunityTables, CommunityEvent>({
  name: 'communities',
  version: 1,
  tables: ['communities'],
  canHandle: ['CommunityCreated', 'CommunityUpdated'],
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

  /** One read of the communities the batch names, its events folded in log order, one upsert. */
  async apply(db, events) {
    const communities = new RowBatch<Held<CommunityRow>>('communities', ['id']);
    await communities.load(
      db,
      events.map((event) => ({ id: event.data.communityId })),
    );
    for (const event of events) {
      switch (event.type) {
        case 'CommunityCreated': {
          const { data } = event;
          if (communities.get({ id: data.communityId })) break;
          communities.set({
            id: data.communityId,
            organisation_id: data.organisationId,
            name: data.name,
            description: data.description,
            details: data.details,
            created_at: data.createdAt,
            updated_at: data.createdAt,
            created_by: data.createdBy,
            updated_by: data.createdBy,
          });
          break;
        }
        case 'CommunityUpdated': {
          const row = communities.get({ id: event.data.communityId });
          if (!row) break;
          const { name, description, details } = event.data.changes;
          communities.set({
            ...row,
            ...(name !== undefined ? { name } : {}),
            ...(description !== undefined ? { description } : {}),
            ...(details !== undefined ? { details } : {}),
            updated_at: event.data.updatedAt,
            updated_by: event.data.updatedBy,
          });
          break;
        }
      }
    }
    await communities.save(db);
  },
});
