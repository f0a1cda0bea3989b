import { sql } from 'kysely';
import type { ApiFamily, DomainKind, DomainNameEvent, DomainStatus, OrganisationEvent } from '../domain/organisation.ts';
import { TENANCY_CHANNEL } from '../infra/tenancy-channel.ts';
import type { Held, NullableTimestamp, Timestamp } from './columns.ts';
import { defineProjection, type Recorded } from './projection.ts';
import { RowBatch } from './row-batch.ts';

export interface OrganisationRow {
  id: string;
  name: string;
  slug: string;
  domain: string;
  default_language: string;
  timezone: string;
  created_at: Timestamp;
  /** Null until the settings first change. */
  updated_at: NullableTimestamp;
  /** Requests per rate-limit window per API token and per signed-in user; null: the platform default. */
  api_token_rate_limit: number | null;
  user_token_rate_limit: number | null;
}

export interface OrganisationDomainRow {
  hostname: string;
  organisation_id: string;
  kind: DomainKind;
  status: DomainStatus;
  verification_token: string | null;
  failure_reason: string | null;
  created_at: Timestamp;
  /** Null for a standard domain (claimed active, never changes). */
  updated_at: NullableTimestamp;
}

export interface ApiTokenRow {
  id: string;
  organisation_id: string;
  name: string;
  prefix: string;
  secret_hash: string;
  domain: string;
  families: ApiFamily[];
  issued_at: Timestamp;
  revoked_at: NullableTimestamp;
}

export interface OrganisationTables {
  organisations: OrganisationRow;
  organisation_domains: OrganisationDomainRow;
  api_tokens: ApiTokenRow;
}

/** `DomainReleased` changes nothing here: the domain's row goes with `DomainRemoved`. */
type OrganisationsEvent = OrganisationEvent | Exclude<DomainNameEvent, { type: 'DomainReleased' }>;

/** Tenancy: organisations, the domains they own, and their API tokens (hashes only). Auth reads these. */
export const organisationsProjection = defineProjection<OrganisationTables, OrganisationsEvent>({
  name: 'organisations',
  version: 1,
  tables: ['organisations', 'organisation_domains', 'api_tokens'],
  canHandle: [
    'OrganisationCreated',
    'OrganisationSettingsChanged',
    'OrganisationRateLimitsChanged',
    'ApiTokenIssued',
    'ApiTokenRevoked',
    'DomainRegistered',
    'DomainVerified',
    'DomainActivated',
    'DomainVerificationFailed',
    'DomainRemoved',
    'DomainClaimed',
  ],
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
    '0003_rate_limits': {
      async up(db) {
        await db.schema.alterTable('organisations').addColumn('api_token_rate_limit', 'integer').addColumn('user_token_rate_limit', 'integer').execute();
      },
    },
    '0004_tenancy_version': {
      // Outside the generation's schema on purpose: one counter for whichever generation is live (see
      // TENANCY_VERSION), so processes that cache tokens hear of every change, rebuilds included.
      async up(db) {
        await sql`create table if not exists public.tenancy_version (id boolean primary key default true check (id), version bigint not null)`.execute(db);
        await sql`insert into public.tenancy_version (id, version) values (true, 0) on conflict (id) do nothing`.execute(db);
      },
    },
  },

  /** One read and one write per table: the rows the batch names, folded in log order. */
  async apply(db, events) {
    const organisations = new RowBatch<Held<OrganisationRow>>('organisations', ['id']);
    const domains = new RowBatch<Held<OrganisationDomainRow>>('organisation_domains', ['hostname']);
    const tokens = new RowBatch<Held<ApiTokenRow>>('api_tokens', ['id']);
    await organisations.load(
      db,
      events.flatMap((event) => (isOrganisationFact(event) ? [{ id: event.data.organisationId }] : [])),
    );
    await domains.load(
      db,
      events.flatMap((event) => (isDomainFact(event) ? [{ hostname: event.data.hostname }] : [])),
    );
    await tokens.load(
      db,
      events.flatMap((event) => (isTokenFact(event) ? [{ id: event.data.tokenId }] : [])),
    );

    for (const event of events) {
      switch (event.type) {
        case 'OrganisationCreated': {
          const { data } = event;
          if (organisations.get({ id: data.organisationId })) break;
          organisations.set({
            id: data.organisationId,
            name: data.name,
            slug: data.slug,
            domain: data.domain,
            default_language: data.defaultLanguage,
            timezone: data.timezone,
            created_at: data.createdAt,
            updated_at: null,
            api_token_rate_limit: null,
            user_token_rate_limit: null,
          });
          break;
        }
        case 'OrganisationSettingsChanged': {
          const { data } = event;
          const row = organisations.get({ id: data.organisationId });
          if (row) organisations.set({ ...row, name: data.name, default_language: data.defaultLanguage, timezone: data.timezone, updated_at: data.changedAt });
          break;
        }
        case 'OrganisationRateLimitsChanged': {
          const { data } = event;
          const row = organisations.get({ id: data.organisationId });
          if (row) {
            organisations.set({
              ...row,
              api_token_rate_limit: data.apiTokenRequests,
              user_token_rate_limit: data.userTokenRequests,
              updated_at: data.changedAt,
            });
          }
          break;
        }
        case 'DomainRegistered': {
          // Registering again (after a removal, or by another organisation) starts the domain afresh.
          const { data } = event;
          domains.set({
            hostname: data.hostname,
            organisation_id: data.organisationId,
            kind: data.kind,
            status: 'pending',
            verification_token: data.verificationToken,
            failure_reason: null,
            created_at: data.registeredAt,
            updated_at: data.registeredAt,
          });
          break;
        }
        case 'DomainVerified':
          setDomainStatus(domains, event.data, 'verified', event.data.verifiedAt);
          break;
        case 'DomainActivated':
          setDomainStatus(domains, event.data, 'active', event.data.activatedAt);
          break;
        case 'DomainVerificationFailed':
          setDomainStatus(domains, event.data, 'failed', event.data.failedAt, event.data.reason);
          break;
        case 'DomainRemoved': {
          const row = domains.get({ hostname: event.data.hostname });
          if (row?.organisation_id === event.data.organisationId) domains.delete(row);
          break;
        }
        case 'DomainClaimed': {
          // Custom domains get their row, pending, from DomainRegistered (appended with the claim).
          const { data } = event;
          if (data.kind !== 'standard') break;
          const row = domains.get({ hostname: data.hostname });
          domains.set(
            row
              ? { ...row, organisation_id: data.organisationId, kind: data.kind, status: 'active' }
              : {
                  hostname: data.hostname,
                  organisation_id: data.organisationId,
                  kind: data.kind,
                  status: 'active',
                  verification_token: null,
                  failure_reason: null,
                  created_at: event.createdAt,
                  updated_at: null,
                },
          );
          break;
        }
        case 'ApiTokenIssued': {
          const { data } = event;
          if (tokens.get({ id: data.tokenId })) break;
          tokens.set({
            id: data.tokenId,
            organisation_id: data.organisationId,
            name: data.name,
            prefix: data.prefix,
            secret_hash: data.secretHash,
            domain: data.domain,
            families: data.families,
            issued_at: data.issuedAt,
            revoked_at: null,
          });
          break;
        }
        case 'ApiTokenRevoked': {
          const row = tokens.get({ id: event.data.tokenId });
          if (row) tokens.set({ ...row, revoked_at: event.data.revokedAt });
          break;
        }
      }
    }

    await organisations.save(db);
    await domains.save(db);
    await tokens.save(db);
    if (events.some((event) => !ADDS_ONLY.has(event.type))) await bumpTenancyVersion(db);
  },
});

/** Facts that only add what no cached token can depend on (a new organisation, a new token). */
const ADDS_ONLY = new Set<string>(['OrganisationCreated', 'ApiTokenIssued']);

/**
 * A change that may invalidate a cached token (a revocation, a domain's status or removal, rate limits):
 * the counter moves in the batch's transaction and its new value is announced on TENANCY_CHANNEL at commit,
 * in commit order. Token caches (infra/auth.ts) drop what they hold on each announcement, and serve from the
 * cache only once they have heard of the counter's current value.
 */
async function bumpTenancyVersion(db: Parameters<typeof organisationsProjection.apply>[0]): Promise<void> {
  await sql`with bumped as (update public.tenancy_version set version = version + 1 returning version)
    select pg_notify(${TENANCY_CHANNEL}, version::text) from bumped`.execute(db);
}

type Fact = Recorded<OrganisationsEvent>;

function isOrganisationFact(
  event: Fact,
): event is Recorded<Extract<OrganisationsEvent, { type: 'OrganisationCreated' | 'OrganisationSettingsChanged' | 'OrganisationRateLimitsChanged' }>> {
  return event.type === 'OrganisationCreated' || event.type === 'OrganisationSettingsChanged' || event.type === 'OrganisationRateLimitsChanged';
}

function isDomainFact(event: Fact): event is Recorded<Extract<OrganisationsEvent, { data: { hostname: string } }>> {
  return 'hostname' in event.data;
}

function isTokenFact(event: Fact): event is Recorded<Extract<OrganisationsEvent, { type: 'ApiTokenIssued' | 'ApiTokenRevoked' }>> {
  return event.type === 'ApiTokenIssued' || event.type === 'ApiTokenRevoked';
}

/** A status change applies to the domain only while the organisation holds it. */
function setDomainStatus(
  domains: RowBatch<Held<OrganisationDomainRow>>,
  domain: { organisationId: string; hostname: string },
  status: 'verified' | 'active' | 'failed',
  at: string,
  reason: string | null = null,
): void {
  const row = domains.get({ hostname: domain.hostname });
  if (row?.organisation_id === domain.organisationId) domains.set({ ...row, status, failure_reason: reason, updated_at: at });
}
