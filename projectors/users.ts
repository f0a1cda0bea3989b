import { sql } from 'kysely';
import type { SocialHandles, UserEvent, UserProfile } from '../domain/user.ts';
import type { VariableValue } from '../domain/variable-config.ts';
import type { Held, Json, NullableTimestamp, Timestamp } from './columns.ts';
import { defineProjection } from './projection.ts';
import { RowBatch } from './row-batch.ts';

export interface UserRow {
  id: string;
  organisation_id: string;
  external_user_id: string;
  username: string | null;
  display_name: string | null;
  email: string | null;
  email_verified_at: NullableTimestamp;
  full_name: string | null;
  parent_email: string | null;
  locale: string | null;
  bio: string | null;
  profile_picture_url: string | null;
  roles: string[];
  is_anonymous: boolean;
  birth_day: number | null;
  birth_month: number | null;
  birth_year: number | null;
  social_handles: Json<SocialHandles>;
  community_ids: string[];
  /** By variable config id. */
  variables: Json<Record<string, VariableValue>>;
  /** Lowercased, in the "C" collation: prefix search. */
  username_key: string | null;
  display_name_key: string | null;
  email_key: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface UserTables {
  users: UserRow;
}

/**
 * Users (team members) of each organisation, with their variables. The `*_key` columns hold the lowercased
 * username, display name and e-mail in the "C" collation, so a plain btree index serves prefix search.
 */
export const usersProjection = defineProjection<UserTables, UserEvent>({
  name: 'users',
  version: 1,
  tables: ['users'],
  canHandle: ['UserCreated', 'UserUpdated', 'UserVariablesSet'],
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

  /** One read of the users the batch changes, its events folded in log order, one upsert and one insert of the new. */
  async apply(db, events) {
    const users = new RowBatch<Held<UserRow>>('users', ['id']);
    // Only the users the batch changes are read. One it only creates is new: it is inserted where the table has
    // none (a creation applied twice leaves the first), without the read.
    const changed = new Set(events.filter((event) => event.type !== 'UserCreated').map((event) => event.data.userId));
    await users.load(
      db,
      [...changed].map((id) => ({ id })),
    );
    for (const event of events) {
      switch (event.type) {
        case 'UserCreated': {
          const { userId, organisationId, externalUserId, createdAt, ...profile } = event.data;
          if (users.get({ id: userId })) break;
          const created: Held<UserRow> = {
            id: userId,
            organisation_id: organisationId,
            external_user_id: externalUserId,
            ...NO_PROFILE,
            ...profileColumns(profile),
            variables: {},
            created_at: createdAt,
            updated_at: createdAt,
          };
          if (changed.has(userId)) users.set(created);
          else users.add(created);
          break;
        }
        case 'UserUpdated': {
          const row = users.get({ id: event.data.userId });
          if (row) users.set({ ...row, ...profileColumns(event.data.changes), updated_at: event.data.updatedAt });
          break;
        }
        case 'UserVariablesSet': {
          const row = users.get({ id: event.data.userId });
          if (row) users.set({ ...row, variables: event.data.values });
          break;
        }
      }
    }
    await users.save(db);
  },
});

type ProfileColumns = Omit<Held<UserRow>, 'id' | 'organisation_id' | 'external_user_id' | 'variables' | 'created_at' | 'updated_at'>;

/** A new user's profile columns before its profile is applied: the nullable ones null (a field the event lacks stays null). */
const NO_PROFILE: Omit<ProfileColumns, 'roles' | 'is_anonymous' | 'social_handles' | 'community_ids'> = {
  username: null,
  display_name: null,
  email: null,
  email_verified_at: null,
  full_name: null,
  parent_email: null,
  locale: null,
  bio: null,
  profile_picture_url: null,
  birth_day: null,
  birth_month: null,
  birth_year: null,
  username_key: null,
  display_name_key: null,
  email_key: null,
};

/** The columns for the profile fields present (an update carries only those that changed). */
function profileColumns(profile: UserProfile): ProfileColumns;
function profileColumns(profile: Partial<UserProfile>): Partial<ProfileColumns>;
function profileColumns(profile: Partial<UserProfile>): Partial<ProfileColumns> {
  const columns: Partial<ProfileColumns> = {};
  const set = <C extends keyof ProfileColumns>(column: C, value: ProfileColumns[C] | undefined) => {
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
  set('social_handles', profile.socialHandles);
  set('community_ids', profile.communityIds);
  set('username_key', profile.username === undefined ? undefined : searchKeyOf(profile.username));
  set('display_name_key', profile.displayName === undefined ? undefined : searchKeyOf(profile.displayName));
  set('email_key', profile.email === undefined ? undefined : searchKeyOf(profile.email));
  return columns;
}

export function searchKeyOf(value: string | null): string | null {
  return value === null ? null : value.toLowerCase();
}
