import { sql } from 'kysely';
import type { LeaderboardEvent } from '../domain/leaderboard.ts';
import type { Projection } from './projection.ts';

/** Leaderboard configs as the admin API shows them. */
export const leaderboardsProjection: Projection = {
  name: 'leaderboards',
  version: 1,
  tables: ['leaderboards'],
  filter: { categories: ['leaderboard'] },
  migrations: {
    '0001_leaderboards': {
      async up(db) {
        await db.schema
          .createTable('leaderboards')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('description', 'text')
          .addColumn('metric_type', 'text', (c) => c.notNull())
          .addColumn('period', 'text', (c) => c.notNull())
          .addColumn('starts_at', 'timestamptz', (c) => c.notNull())
          .addColumn('expires_at', 'timestamptz')
          .addColumn('status', 'text', (c) => c.notNull())
          .addColumn('conditions', 'jsonb', (c) => c.notNull())
          .addColumn('rewards_config', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
          .addColumn('created_at', 'timestamptz', (c) => c.notNull())
          .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
          .addColumn('created_by', 'text', (c) => c.notNull())
          .addColumn('updated_by', 'text', (c) => c.notNull())
          .execute();
        // The admin list: one organisation, newest first, id as the tie-break.
        await db.schema.createIndex('leaderboards_by_organisation').on('leaderboards').columns(['organisation_id', 'created_at desc', 'id desc']).execute();
      },
    },
  },

  async apply(db, event) {
    const { type, data } = event as unknown as LeaderboardEvent;
    switch (type) {
      case 'LeaderboardCreated':
        await db
          .insertInto('leaderboards')
          .values({
            id: data.leaderboardId,
            organisation_id: data.organisationId,
            name: data.name,
            description: data.description,
            metric_type: data.metricType,
            period: data.period,
            starts_at: data.startsAt,
            expires_at: data.expiresAt,
            status: data.status,
            conditions: JSON.stringify(data.conditions),
            rewards_config: JSON.stringify([]),
            created_at: data.createdAt,
            updated_at: data.createdAt,
            created_by: data.createdBy,
            updated_by: data.createdBy,
          })
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
        return;
    }
  },
};
