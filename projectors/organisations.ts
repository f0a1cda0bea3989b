import { sql } from 'kysely';
import type { DomainNameEvent, OrganisationEvent } from '../domain/organisation.ts';
import type { Projection } from './projection.ts';

/** Tenancy: organisations, the domains they own, and their API tokens (hashes only). Auth reads these. */
export const organisationsProjection: Projection = {
  name: 'organisations',
  version: 1,
  tables: ['organisations', 'organisation_domains', 'api_tokens'],
  filter: { categories: ['organisation', 'domain'] },
  migrations: {
    '0001_tenancy': {
      async up(db) {
        await db.schema
          .createTable('organisations')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('slug', 'text', (c) => c.notNull().unique())
          .addColumn('domain', 'text', (c) => c.notNull())
          .addColumn('default_language', 'text', (c) => c.notNull())
          .addColumn('timezone', 'text', (c) => c.notNull())
          .addColumn('created_at', 'timestamptz', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('organisation_domains')
          .addColumn('hostname', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('kind', 'text', (c) => c.notNull())
          .addColumn('status', 'text', (c) => c.notNull())
          .addColumn('created_at', 'timestamptz', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('api_tokens')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('prefix', 'text', (c) => c.notNull())
          .addColumn('secret_hash', 'text', (c) => c.notNull().unique())
          .addColumn('domain', 'text', (c) => c.notNull())
          .addColumn('families', sql`text[]`, (c) => c.notNull())
          .addColumn('issued_at', 'timestamptz', (c) => c.notNull())
          .addColumn('revoked_at', 'timestamptz')
          .execute();
        await db.schema.createIndex('api_tokens_by_organisation').on('api_tokens').columns(['organisation_id', 'issued_at']).execute();
      },
    },
  },

  async apply(db, event) {
    const { type, data } = event as unknown as OrganisationEvent | DomainNameEvent;
    switch (type) {
      case 'OrganisationCreated':
        await db
          .insertInto('organisations')
          .values({
            id: data.organisationId,
            name: data.name,
            slug: data.slug,
            domain: data.domain,
            default_language: data.defaultLanguage,
            timezone: data.timezone,
            created_at: data.createdAt,
          })
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
        return;
      case 'DomainClaimed':
        await db
          .insertInto('organisation_domains')
          .values({ hostname: data.hostname, organisation_id: data.organisationId, kind: data.kind, status: 'active', created_at: event.createdAt })
          .onConflict((oc) => oc.column('hostname').doUpdateSet({ organisation_id: data.organisationId, kind: data.kind, status: 'active' }))
          .execute();
        return;
      case 'ApiTokenIssued':
        await db
          .insertInto('api_tokens')
          .values({
            id: data.tokenId,
            organisation_id: data.organisationId,
            name: data.name,
            prefix: data.prefix,
            secret_hash: data.secretHash,
            domain: data.domain,
            families: data.families,
            issued_at: data.issuedAt,
          })
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
        return;
      case 'ApiTokenRevoked':
        await db.updateTable('api_tokens').set({ revoked_at: data.revokedAt }).where('id', '=', data.tokenId).execute();
        return;
    }
  },
};
