import { sql, type Kysely } from 'kysely';
import type { DomainNameEvent, OrganisationEvent } from '../domain/organisation.ts';
import type { LegacyProjection as Projection } from './legacy.ts';

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
    '0002_domain_lifecycle_and_settings': {
      async up(db) {
        await db.schema
          .alterTable('organisation_domains')
          .addColumn('verification_token', 'text')
          .addColumn('failure_reason', 'text')
          .addColumn('updated_at', 'timestamptz')
          .execute();
        await db.schema.createIndex('organisation_domains_by_organisation').on('organisation_domains').columns(['organisation_id', 'created_at']).execute();
        await db.schema.createIndex('api_tokens_by_domain').on('api_tokens').columns(['organisation_id', 'domain']).execute();
        await db.schema.alterTable('organisations').addColumn('updated_at', 'timestamptz').execute();
      },
    },
  },

  async apply(db, event) {
    const { type, data } = event as unknown as OrganisationEvent | DomainNameEvent;
    switch (type) {
      case 'OrganisationSettingsChanged':
        await db
          .updateTable('organisations')
          .set({ name: data.name, default_language: data.defaultLanguage, timezone: data.timezone, updated_at: data.changedAt })
          .where('id', '=', data.organisationId)
          .execute();
        return;
      case 'DomainRegistered':
        await db
          .insertInto('organisation_domains')
          .values({
            hostname: data.hostname,
            organisation_id: data.organisationId,
            kind: data.kind,
            status: 'pending',
            verification_token: data.verificationToken,
            created_at: data.registeredAt,
            updated_at: data.registeredAt,
          })
          .onConflict((oc) =>
            oc.column('hostname').doUpdateSet({
              organisation_id: data.organisationId,
              kind: data.kind,
              status: 'pending',
              verification_token: data.verificationToken,
              failure_reason: null,
              created_at: data.registeredAt,
              updated_at: data.registeredAt,
            }),
          )
          .execute();
        return;
      case 'DomainVerified':
        await setDomainStatus(db, data, 'verified', data.verifiedAt);
        return;
      case 'DomainActivated':
        await setDomainStatus(db, data, 'active', data.activatedAt);
        return;
      case 'DomainVerificationFailed':
        await setDomainStatus(db, data, 'failed', data.failedAt, data.reason);
        return;
      case 'DomainRemoved':
        await db.deleteFrom('organisation_domains').where('hostname', '=', data.hostname).where('organisation_id', '=', data.organisationId).execute();
        return;
      case 'DomainReleased':
        return;
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
        // Custom domains get their row, pending, from DomainRegistered (appended with the claim).
        if (data.kind !== 'standard') return;
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

async function setDomainStatus(
  db: Kysely<any>,
  domain: { organisationId: string; hostname: string },
  status: 'verified' | 'active' | 'failed',
  at: string,
  reason: string | null = null,
): Promise<void> {
  await db
    .updateTable('organisation_domains')
    .set({ status, failure_reason: reason, updated_at: at })
    .where('hostname', '=', domain.hostname)
    .where('organisation_id', '=', domain.organisationId)
    .execute();
}
