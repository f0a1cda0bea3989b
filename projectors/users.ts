import { sql } from 'kysely';
import type { UserEvent, UserProfile } from '../domain/user.ts';
import type { LegacyProjection as Projection } from './legacy.ts';

/**
 * Users (team members) of each organisation, with their variables. The `*_key` columns hold the lowercased
 * username, display name and e-mail in the "C" collation, so a plain btree index serves prefix search.
 */
export const usersProjection: Projection = {
  name: 'users',
  version: 1,
  tables: ['users'],
  filter: { categories: ['user'] },
  migrations: {
    '0001_users': {
      async up(db) {
        const searchKey = sql`collate "C"`;
        await db.schema
          .createTable('users')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('external_user_id', 'text', (c) => c.notNull())
          .addColumn('username', 'text')
          .addColumn('display_name', 'text')
          .addColumn('email', 'text')
          .addColumn('email_verified_at', 'timestamptz')
          .addColumn('full_name', 'text')
          .addColumn('parent_email', 'text')
          .addColumn('locale', 'text')
          .addColumn('bio', 'text')
          .addColumn('profile_picture_url', 'text')
          .addColumn('roles', sql`text[]`, (c) => c.notNull())
          .addColumn('is_anonymous', 'boolean', (c) => c.notNull())
          .addColumn('birth_day', 'integer')
          .addColumn('birth_month', 'integer')
          .addColumn('birth_year', 'integer')
          .addColumn('social_handles', 'jsonb', (c) => c.notNull())
          .addColumn('community_ids', sql`text[]`, (c) => c.notNull())
          .addColumn('variables', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
          .addColumn('username_key', 'text', (c) => c.modifyEnd(searchKey))
          .addColumn('display_name_key', 'text', (c) => c.modifyEnd(searchKey))
          .addColumn('email_key', 'text', (c) => c.modifyEnd(searchKey))
          .addColumn('created_at', 'timestamptz', (c) => c.notNull())
          .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
          .execute();
        // Lists: one organisation, newest first, id as the tie-break.
        await db.schema.createIndex('users_by_organisation').on('users').columns(['organisation_id', 'created_at desc', 'id desc']).execute();
        await db.schema.createIndex('users_by_external_id').on('users').columns(['organisation_id', 'external_user_id']).unique().execute();
        await db.schema.createIndex('users_by_username').on('users').columns(['organisation_id', 'username_key']).execute();
        await db.schema.createIndex('users_by_display_name').on('users').columns(['organisation_id', 'display_name_key']).execute();
        await db.schema.createIndex('users_by_email').on('users').columns(['organisation_id', 'email_key']).execute();
        await db.schema.createIndex('users_by_role').on('users').using('gin').column('roles').execute();
        await db.schema.createIndex('users_by_community').on('users').using('gin').column('community_ids').execute();
      },
    },
  },

  async apply(db, event) {
    const { type, data } = event as unknown as UserEvent;
    switch (type) {
      case 'UserCreated': {
        const { userId, organisationId, externalUserId, createdAt, ...profile } = data;
        await db
          .insertInto('users')
          .values({
            id: userId,
            organisation_id: organisationId,
            external_user_id: externalUserId,
            ...columnsOf(profile),
            created_at: createdAt,
            updated_at: createdAt,
          })
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
        return;
      }
      case 'UserUpdated':
        await db
          .updateTable('users')
          .set({ ...columnsOf(data.changes), updated_at: data.updatedAt })
          .where('id', '=', data.userId)
          .execute();
        return;
      case 'UserVariablesSet':
        await db
          .updateTable('users')
          .set({ variables: JSON.stringify(data.values) })
          .where('id', '=', data.userId)
          .execute();
        return;
    }
  },
};

/** The columns for the profile fields present (an update carries only those that changed). */
function columnsOf(profile: Partial<UserProfile>): Record<string, unknown> {
  const columns: Record<string, unknown> = {};
  const set = (column: string, value: unknown) => {
    if (value !== undefined) columns[column] = value;
  };
  set('username', profile.username);
  set('display_name', profile.displayName);
  set('email', profile.email);
  set('email_verified_at', profile.emailVerifiedAt);
  set('full_name', profile.fullName);
  set('parent_email', profile.parentEmail);
  set('locale', profile.locale);
  set('bio', profile.bio);
  set('profile_picture_url', profile.profilePictureUrl);
  set('roles', profile.roles);
  set('is_anonymous', profile.isAnonymous);
  set('birth_day', profile.birthDay);
  set('birth_month', profile.birthMonth);
  set('birth_year', profile.birthYear);
  set('social_handles', profile.socialHandles === undefined ? undefined : JSON.stringify(profile.socialHandles));
  set('community_ids', profile.communityIds);
  set('username_key', profile.username === undefined ? undefined : searchKeyOf(profile.username));
  set('display_name_key', profile.displayName === undefined ? undefined : searchKeyOf(profile.displayName));
  set('email_key', profile.email === undefined ? undefined : searchKeyOf(profile.email));
  return columns;
}

export function searchKeyOf(value: string | null): string | null {
  return value === null ? null : value.toLowerCase();
}
