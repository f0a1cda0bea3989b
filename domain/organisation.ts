import { DomainError, type Decider, type DomainEvent } from './decider.ts';

export const API_FAMILIES = ['admin', 'integration', 'analytics'] as const;
export type ApiFamily = (typeof API_FAMILIES)[number];

export const SLUG_PATTERN = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const RESERVED_SLUGS = new Set(['www', 'api', 'app', 'admin', 'mail', 'status']);

export type OrganisationEvent =
  | DomainEvent<
      'OrganisationCreated',
      { organisationId: string; name: string; slug: string; domain: string; defaultLanguage: string; timezone: string; createdAt: string }
    >
  | DomainEvent<
      'ApiTokenIssued',
      { organisationId: string; tokenId: string; name: string; prefix: string; secretHash: string; domain: string; families: ApiFamily[]; issuedAt: string }
    >
  | DomainEvent<'ApiTokenRevoked', { organisationId: string; tokenId: string; revokedAt: string }>;

export type OrganisationCommand =
  | { type: 'CreateOrganisation'; data: { organisationId: string; name: string; slug: string; platformDomain: string; adminToken: FirstToken; now: string } }
  | { type: 'IssueApiToken'; data: { tokenId: string; name: string; prefix: string; secretHash: string; domain?: string; families: ApiFamily[]; now: string } }
  | { type: 'RevokeApiToken'; data: { tokenId: string; now: string } };

/** An organisation is born with one admin token for its standard domain, or nobody could ever use it. */
export interface FirstToken {
  tokenId: string;
  prefix: string;
  secretHash: string;
}

export interface OrganisationState {
  organisationId: string | null;
  domains: string[];
  tokens: Map<string, { revoked: boolean }>;
}

export function standardDomain(slug: string, platformDomain: string): string {
  return `${slug}.${platformDomain}`;
}

export const organisationDecider: Decider<OrganisationCommand, OrganisationEvent, OrganisationState> = {
  initialState: { organisationId: null, domains: [], tokens: new Map() },

  decide(command, state) {
    switch (command.type) {
      case 'CreateOrganisation': {
        const { organisationId, name, slug, platformDomain, adminToken, now } = command.data;
        if (state.organisationId) throw new DomainError('conflict', `Organisation ${organisationId} already exists`);
        if (!SLUG_PATTERN.test(slug)) throw new DomainError('invalid', 'A slug is 1 to 63 lowercase letters, digits or inner hyphens');
        if (RESERVED_SLUGS.has(slug)) throw new DomainError('invalid', `The slug "${slug}" is reserved`);
        if (name.trim().length === 0) throw new DomainError('invalid', 'An organisation needs a name');
        const domain = standardDomain(slug, platformDomain);
        return [
          { type: 'OrganisationCreated', data: { organisationId, name: name.trim(), slug, domain, defaultLanguage: 'en', timezone: 'UTC', createdAt: now } },
          { type: 'ApiTokenIssued', data: { organisationId, ...adminToken, name: 'admin', domain, families: [...API_FAMILIES], issuedAt: now } },
        ];
      }
      case 'IssueApiToken': {
        const organisationId = requireOrganisation(state);
        const { tokenId, name, prefix, secretHash, families, now } = command.data;
        const domain = command.data.domain ?? state.domains[0]!;
        if (!state.domains.includes(domain)) throw new DomainError('invalid', `The domain ${domain} is not one of this organisation's domains`);
        if (families.length === 0) throw new DomainError('invalid', 'A token needs at least one API family');
        if (state.tokens.has(tokenId)) throw new DomainError('conflict', `Token ${tokenId} already exists`);
        return [
          { type: 'ApiTokenIssued', data: { organisationId, tokenId, name, prefix, secretHash, domain, families: [...new Set(families)], issuedAt: now } },
        ];
      }
      case 'RevokeApiToken': {
        const organisationId = requireOrganisation(state);
        const token = state.tokens.get(command.data.tokenId);
        if (!token) throw new DomainError('not_found', `Token ${command.data.tokenId} not found`);
        if (token.revoked) return [];
        return [{ type: 'ApiTokenRevoked', data: { organisationId, tokenId: command.data.tokenId, revokedAt: command.data.now } }];
      }
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'OrganisationCreated':
        return { ...state, organisationId: event.data.organisationId, domains: [event.data.domain] };
      case 'ApiTokenIssued':
        return { ...state, tokens: new Map(state.tokens).set(event.data.tokenId, { revoked: false }) };
      case 'ApiTokenRevoked':
        return { ...state, tokens: new Map(state.tokens).set(event.data.tokenId, { revoked: true }) };
    }
  },
};

function requireOrganisation(state: OrganisationState): string {
  if (!state.organisationId) throw new DomainError('not_found', 'Organisation not found');
  return state.organisationId;
}

/** A domain name belongs to one organisation at a time; its own stream makes the claim atomic. */
export type DomainNameEvent = DomainEvent<'DomainClaimed', { hostname: string; organisationId: string; kind: 'standard' | 'custom-subdomain' | 'white-label' }>;
export type DomainNameCommand = { type: 'ClaimDomain'; data: DomainNameEvent['data'] };

export const domainNameDecider: Decider<DomainNameCommand, DomainNameEvent, { claimedBy: string | null }> = {
  initialState: { claimedBy: null },
  decide(command, state) {
    if (state.claimedBy) throw new DomainError('conflict', `The domain ${command.data.hostname} is already in use`);
    return [{ type: 'DomainClaimed', data: command.data }];
  },
  evolve(_state, event) {
    return { claimedBy: event.data.organisationId };
  },
};
