import { describe, it } from 'vitest';
import { domainNameDecider, organisationDecider, type OrganisationCommand, type OrganisationEvent } from '../domain/organisation.ts';
import { given } from './support/decider-spec.ts';

const now = '2026-01-01T00:00:00.000Z';
const organisationId = 'a'.repeat(24);
const adminToken = { tokenId: 'b'.repeat(24), prefix: '0123abcd', secretHash: 'f'.repeat(64) };
const create = (slug = 'acme'): OrganisationCommand => ({
  type: 'CreateOrganisation',
  data: { organisationId, name: ' Acme ', slug, platformDomain: 'engage.test', adminToken, now },
});
const born: OrganisationEvent[] = [
  {
    type: 'OrganisationCreated',
    data: { organisationId, name: 'Acme', slug: 'acme', domain: 'acme.engage.test', defaultLanguage: 'en', timezone: 'UTC', createdAt: now },
  },
  {
    type: 'ApiTokenIssued',
    data: { organisationId, ...adminToken, name: 'admin', domain: 'acme.engage.test', families: ['admin', 'integration', 'analytics'], issuedAt: now },
  },
];
const issue = (overrides: Partial<Extract<OrganisationCommand, { type: 'IssueApiToken' }>['data']> = {}): OrganisationCommand => ({
  type: 'IssueApiToken',
  data: { tokenId: 'c'.repeat(24), name: 'app', prefix: 'deadbeef', secretHash: 'e'.repeat(64), families: ['integration', 'integration'], now, ...overrides },
});

describe('organisation decider', () => {
  it('creates an organisation on its standard subdomain, with an admin token for all families', () => {
    given(organisationDecider, []).when(create()).then(born);
  });

  it('refuses a bad or reserved slug, and a second creation', () => {
    given(organisationDecider, []).when(create('Acme!')).thenRefuses('invalid', /slug/);
    given(organisationDecider, [])
      .when(create('www'))
      .thenRefuses('invalid', /reserved/);
    given(organisationDecider, born)
      .when(create())
      .thenRefuses('conflict', /already exists/);
  });

  it('issues a token for one of its domains, once per family', () => {
    given(organisationDecider, born)
      .when(issue())
      .then([
        {
          type: 'ApiTokenIssued',
          data: {
            organisationId,
            tokenId: 'c'.repeat(24),
            name: 'app',
            prefix: 'deadbeef',
            secretHash: 'e'.repeat(64),
            domain: 'acme.engage.test',
            families: ['integration'],
            issuedAt: now,
          },
        },
      ]);
  });

  it('refuses a token for a foreign domain, without families, or for no organisation', () => {
    given(organisationDecider, born)
      .when(issue({ domain: 'beta.engage.test' }))
      .thenRefuses('invalid', /not one of this organisation/);
    given(organisationDecider, born)
      .when(issue({ families: [] }))
      .thenRefuses('invalid', /at least one/);
    given(organisationDecider, [])
      .when(issue())
      .thenRefuses('not_found', /Organisation not found/);
  });

  it('revokes a token once; revoking again decides nothing; an unknown token is not found', () => {
    const revoke: OrganisationCommand = { type: 'RevokeApiToken', data: { tokenId: adminToken.tokenId, now } };
    const revoked: OrganisationEvent = { type: 'ApiTokenRevoked', data: { organisationId, tokenId: adminToken.tokenId, revokedAt: now } };
    given(organisationDecider, born).when(revoke).then([revoked]);
    given(organisationDecider, [...born, revoked])
      .when(revoke)
      .then([]);
    given(organisationDecider, born)
      .when({ type: 'RevokeApiToken', data: { tokenId: 'd'.repeat(24), now } })
      .thenRefuses('not_found', /not found/);
  });
});

describe('domain name decider', () => {
  const claim = { type: 'ClaimDomain' as const, data: { hostname: 'acme.engage.test', organisationId, kind: 'standard' as const } };
  it('lets one organisation claim a free domain name, and nobody claim it again', () => {
    given(domainNameDecider, [])
      .when(claim)
      .then([{ type: 'DomainClaimed', data: claim.data }]);
    given(domainNameDecider, [{ type: 'DomainClaimed', data: claim.data }])
      .when(claim)
      .thenRefuses('conflict', /already in use/);
  });
});
