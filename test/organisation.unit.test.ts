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

describe('organisation decider: domains and settings', () => {
  const token = 'engage-verification=' + '0'.repeat(32);
  const register = (hostname: string, kind: 'custom-subdomain' | 'white-label'): OrganisationCommand => ({
    type: 'RegisterDomain',
    data: { hostname, kind, platformDomain: 'engage.test', verificationToken: token, now },
  });
  const registered = (hostname: string, kind: 'custom-subdomain' | 'white-label'): OrganisationEvent => ({
    type: 'DomainRegistered',
    data: { organisationId, hostname, kind, verificationToken: token, registeredAt: now },
  });
  const verify = (outcome: { verified: true } | { verified: false; reason: string }, verificationToken = token): OrganisationCommand => ({
    type: 'RecordDomainVerification',
    data: { hostname: 'shop.example.com', verificationToken, outcome, now },
  });

  it('registers a white-label domain pending, a custom subdomain verified at once', () => {
    given(organisationDecider, born)
      .when(register('shop.example.com', 'white-label'))
      .then([registered('shop.example.com', 'white-label')]);
    given(organisationDecider, born)
      .when(register('shop.engage.test', 'custom-subdomain'))
      .then([
        registered('shop.engage.test', 'custom-subdomain'),
        { type: 'DomainVerified', data: { organisationId, hostname: 'shop.engage.test', method: 'platform', verifiedAt: now } },
      ]);
  });

  it('refuses a bad hostname, a custom subdomain outside the platform or nested, a white-label inside it, and a second registration', () => {
    given(organisationDecider, born)
      .when(register('not a host', 'white-label'))
      .thenRefuses('invalid', /not a valid hostname/);
    given(organisationDecider, born)
      .when(register('shop.example.com', 'custom-subdomain'))
      .thenRefuses('invalid', /<label>\.engage\.test/);
    given(organisationDecider, born)
      .when(register('a.b.engage.test', 'custom-subdomain'))
      .thenRefuses('invalid', /<label>\.engage\.test/);
    given(organisationDecider, born)
      .when(register('shop.engage.test', 'white-label'))
      .thenRefuses('invalid', /outside engage\.test/);
    given(organisationDecider, [...born, registered('shop.example.com', 'white-label')])
      .when(register('shop.example.com', 'white-label'))
      .thenRefuses('conflict', /already registered/);
  });

  it('records verification: verified and active, or failed with the reason; nothing once settled or for a stale registration', () => {
    const history = [...born, registered('shop.example.com', 'white-label')];
    given(organisationDecider, history)
      .when(verify({ verified: true }))
      .then([
        { type: 'DomainVerified', data: { organisationId, hostname: 'shop.example.com', method: 'dns-txt', verifiedAt: now } },
        { type: 'DomainActivated', data: { organisationId, hostname: 'shop.example.com', activatedAt: now } },
      ]);
    given(organisationDecider, history)
      .when(verify({ verified: false, reason: 'no record' }))
      .then([{ type: 'DomainVerificationFailed', data: { organisationId, hostname: 'shop.example.com', reason: 'no record', failedAt: now } }]);
    const failed: OrganisationEvent = { type: 'DomainVerificationFailed', data: { organisationId, hostname: 'shop.example.com', reason: 'x', failedAt: now } };
    given(organisationDecider, [...history, failed])
      .when(verify({ verified: true }))
      .then([]);
    given(organisationDecider, history)
      .when(verify({ verified: true }, 'stale'))
      .then([]);
    given(organisationDecider, born)
      .when(verify({ verified: true }))
      .then([]);
  });

  it('issues tokens only for active domains', () => {
    given(organisationDecider, [...born, registered('shop.example.com', 'white-label')])
      .when(issue({ domain: 'shop.example.com' }))
      .thenRefuses('invalid', /pending, not active/);
  });

  it('removes a domain and revokes its live tokens; the standard domain cannot go; an unknown one is not found', () => {
    const active: OrganisationEvent[] = [
      ...born,
      registered('shop.example.com', 'white-label'),
      { type: 'DomainActivated', data: { organisationId, hostname: 'shop.example.com', activatedAt: now } },
      {
        type: 'ApiTokenIssued',
        data: {
          organisationId,
          tokenId: 'c'.repeat(24),
          name: 'shop',
          prefix: 'deadbeef',
          secretHash: 'e'.repeat(64),
          domain: 'shop.example.com',
          families: ['admin'],
          issuedAt: now,
        },
      },
    ];
    given(organisationDecider, active)
      .when({ type: 'RemoveDomain', data: { hostname: 'shop.example.com', now } })
      .then([
        { type: 'DomainRemoved', data: { organisationId, hostname: 'shop.example.com', removedAt: now } },
        { type: 'ApiTokenRevoked', data: { organisationId, tokenId: 'c'.repeat(24), revokedAt: now } },
      ]);
    given(organisationDecider, active)
      .when({ type: 'RemoveDomain', data: { hostname: 'acme.engage.test', now } })
      .thenRefuses('conflict', /standard domain/);
    given(organisationDecider, born)
      .when({ type: 'RemoveDomain', data: { hostname: 'shop.example.com', now } })
      .thenRefuses('not_found', /not one of/);
  });

  it('changes settings to a canonical zone and language; nothing when nothing changes; refuses bad values', () => {
    given(organisationDecider, born)
      .when({ type: 'ChangeSettings', data: { timezone: 'Europe/Brussels', defaultLanguage: 'nl-be', now } })
      .then([
        { type: 'OrganisationSettingsChanged', data: { organisationId, name: 'Acme', defaultLanguage: 'nl-BE', timezone: 'Europe/Brussels', changedAt: now } },
      ]);
    given(organisationDecider, born)
      .when({ type: 'ChangeSettings', data: { name: 'Acme', timezone: 'UTC', now } })
      .then([]);
    given(organisationDecider, born)
      .when({ type: 'ChangeSettings', data: { timezone: 'Mars/Olympus', now } })
      .thenRefuses('invalid', /IANA/);
    given(organisationDecider, born)
      .when({ type: 'ChangeSettings', data: { defaultLanguage: 'english!', now } })
      .thenRefuses('invalid', /BCP 47/);
    given(organisationDecider, born)
      .when({ type: 'ChangeSettings', data: { name: '  ', now } })
      .thenRefuses('invalid', /needs a name/);
    given(organisationDecider, [])
      .when({ type: 'ChangeSettings', data: { name: 'x', now } })
      .thenRefuses('not_found', /Organisation not found/);
  });

  it('changes rate limits in their own event; left out keeps, null goes back to the default; refuses limits out of bounds', () => {
    const limited = { type: 'OrganisationRateLimitsChanged' as const, data: { organisationId, apiTokenRequests: 50, userTokenRequests: null, changedAt: now } };
    given(organisationDecider, born)
      .when({ type: 'ChangeSettings', data: { name: 'Acme NV', rateLimits: { apiTokenRequests: 50 }, now } })
      .then([
        { type: 'OrganisationSettingsChanged', data: { organisationId, name: 'Acme NV', defaultLanguage: 'en', timezone: 'UTC', changedAt: now } },
        limited,
      ]);
    given(organisationDecider, [...born, limited])
      .when({ type: 'ChangeSettings', data: { rateLimits: { userTokenRequests: 5 }, now } })
      .then([{ type: 'OrganisationRateLimitsChanged', data: { organisationId, apiTokenRequests: 50, userTokenRequests: 5, changedAt: now } }]);
    given(organisationDecider, [...born, limited])
      .when({ type: 'ChangeSettings', data: { rateLimits: { apiTokenRequests: null }, now } })
      .then([{ type: 'OrganisationRateLimitsChanged', data: { organisationId, apiTokenRequests: null, userTokenRequests: null, changedAt: now } }]);
    given(organisationDecider, [...born, limited])
      .when({ type: 'ChangeSettings', data: { rateLimits: { apiTokenRequests: 50, userTokenRequests: null }, now } })
      .then([]);
    for (const apiTokenRequests of [0, 2.5, 1_000_001]) {
      given(organisationDecider, born)
        .when({ type: 'ChangeSettings', data: { rateLimits: { apiTokenRequests }, now } })
        .thenRefuses('invalid', /whole number from 1 to 1000000/);
    }
  });
});

describe('domain name decider: release', () => {
  const claimed = { type: 'DomainClaimed' as const, data: { hostname: 'shop.example.com', organisationId, kind: 'white-label' as const } };
  const release = { type: 'ReleaseDomain' as const, data: { hostname: 'shop.example.com', organisationId } };
  it('lets the owner release a domain, which anyone may then claim; nobody else may release it', () => {
    given(domainNameDecider, [claimed])
      .when(release)
      .then([{ type: 'DomainReleased', data: release.data }]);
    given(domainNameDecider, [claimed, { type: 'DomainReleased', data: release.data }])
      .when({ type: 'ClaimDomain', data: { ...claimed.data, organisationId: 'f'.repeat(24) } })
      .then([{ type: 'DomainClaimed', data: { ...claimed.data, organisationId: 'f'.repeat(24) } }]);
    given(domainNameDecider, [claimed])
      .when({ type: 'ReleaseDomain', data: { ...release.data, organisationId: 'f'.repeat(24) } })
      .thenRefuses('not_found', /not this organisation/);
  });
});
