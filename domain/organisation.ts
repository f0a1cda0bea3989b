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
  | DomainEvent<'ApiTokenRevoked', { organisationId: string; tokenId: string; revokedAt: string }>
  | DomainEvent<'OrganisationSettingsChanged', { organisationId: string; name: string; defaultLanguage: string; timezone: string; changedAt: string }>
  | DomainEvent<'OrganisationRateLimitsChanged', { organisationId: string } & RateLimitOverrides & { changedAt: string }>
  | DomainEvent<'DomainRegistered', { organisationId: string; hostname: string; kind: CustomDomainKind; verificationToken: string; registeredAt: string }>
  | DomainEvent<'DomainVerified', { organisationId: string; hostname: string; method: 'platform' | 'dns-txt'; verifiedAt: string }>
  | DomainEvent<'DomainActivated', { organisationId: string; hostname: string; activatedAt: string }>
  | DomainEvent<'DomainVerificationFailed', { organisationId: string; hostname: string; reason: string; failedAt: string }>
  | DomainEvent<'DomainRemoved', { organisationId: string; hostname: string; removedAt: string }>;

export type OrganisationCommand =
  | { type: 'CreateOrganisation'; data: { organisationId: string; name: string; slug: string; platformDomain: string; adminToken: FirstToken; now: string } }
  | { type: 'IssueApiToken'; data: { tokenId: string; name: string; prefix: string; secretHash: string; domain?: string; families: ApiFamily[]; now: string } }
  | { type: 'RevokeApiToken'; data: { tokenId: string; now: string } }
  | {
      type: 'ChangeSettings';
      data: { name?: string; defaultLanguage?: string; timezone?: string; rateLimits?: Partial<RateLimitOverrides>; now: string };
    }
  | { type: 'RegisterDomain'; data: { hostname: string; kind: CustomDomainKind; platformDomain: string; verificationToken: string; now: string } }
  | {
      type: 'RecordDomainVerification';
      data: { hostname: string; verificationToken: string; outcome: { verified: true } | { verified: false; reason: string }; now: string };
    }
  | { type: 'RemoveDomain'; data: { hostname: string; now: string } };

export const CUSTOM_DOMAIN_KINDS = ['custom-subdomain', 'white-label'] as const;
export type CustomDomainKind = (typeof CUSTOM_DOMAIN_KINDS)[number];
export type DomainKind = 'standard' | CustomDomainKind;
export type DomainStatus = 'pending' | 'verified' | 'active' | 'failed';

/** A hostname: dot-separated labels of letters, digits and inner hyphens, at least two labels, 253 characters at most. */
export const HOSTNAME_PATTERN = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$/;

/** Where the TXT record that proves control of a white-label domain must be published. */
export function verificationRecordName(hostname: string): string {
  return `_engage-verification.${hostname}`;
}

/** An IANA time zone as this runtime's Intl knows it, in its canonical spelling; null when it is not one (offsets are not zones). */
export function canonicalTimeZone(zone: string): string | null {
  if (!/^[A-Za-z]/.test(zone)) return null;
  try {
    return new Intl.DateTimeFormat('en', { timeZone: zone }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
}

/** A BCP 47 language tag such as `en` or `nl-BE`, in its canonical form; null when it is not one. */
export function canonicalLanguage(tag: string): string | null {
  if (!/^[A-Za-z]{2,3}(?:-[A-Za-z0-9]{2,8})*$/.test(tag)) return null;
  try {
    return Intl.getCanonicalLocales(tag)[0] ?? null;
  } catch {
    return null;
  }
}

/**
 * Requests per rate-limit window an organisation allows each of its API tokens and each signed-in user;
 * null: the platform's default. The window and the defaults are the operator's (RATE_LIMIT_* settings).
 */
export interface RateLimitOverrides {
  apiTokenRequests: number | null;
  userTokenRequests: number | null;
}

export const RATE_LIMIT_BOUNDS = { min: 1, max: 1_000_000 } as const;

const NO_RATE_LIMIT_OVERRIDES: RateLimitOverrides = { apiTokenRequests: null, userTokenRequests: null };

/** An organisation is born with one admin token for its standard domain, or nobody could ever use it. */
export interface FirstToken {
  tokenId: string;
  prefix: string;
  secretHash: string;
}

export interface DomainState {
  kind: DomainKind;
  status: DomainStatus;
  /** The token of the registration under way, so a verification left over from an earlier registration is ignored. */
  verificationToken: string | null;
}

export interface OrganisationState {
  organisationId: string | null;
  standardDomain: string | null;
  settings: { name: string; defaultLanguage: string; timezone: string } | null;
  rateLimits: RateLimitOverrides;
  domains: Map<string, DomainState>;
  tokens: Map<string, { revoked: boolean; domain: string }>;
}

export function standardDomain(slug: string, platformDomain: string): string {
  return `${slug}.${platformDomain}`;
}

export const organisationDecider: Decider<OrganisationCommand, OrganisationEvent, OrganisationState> = {
  initialState: { organisationId: null, standardDomain: null, settings: null, rateLimits: NO_RATE_LIMIT_OVERRIDES, domains: new Map(), tokens: new Map() },

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
        const domain = command.data.domain ?? state.standardDomain!;
        const known = state.domains.get(domain);
        if (!known) throw new DomainError('invalid', `The domain ${domain} is not one of this organisation's domains`);
        if (known.status !== 'active') throw new DomainError('invalid', `The domain ${domain} is ${known.status}, not active yet`);
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
      case 'ChangeSettings': {
        const organisationId = requireOrganisation(state);
        const { now, ...change } = command.data;
        // Left out: unchanged; null: back to the platform default.
        const changedLimit = (field: keyof RateLimitOverrides) =>
          change.rateLimits?.[field] === undefined ? state.rateLimits[field] : change.rateLimits[field];
        const name = change.name?.trim();
        if (name !== undefined && name.length === 0) throw new DomainError('invalid', 'An organisation needs a name');
        const timezone = change.timezone === undefined ? undefined : canonicalTimeZone(change.timezone);
        if (timezone === null) throw new DomainError('invalid', `${change.timezone} is not an IANA time zone`);
        const language = change.defaultLanguage === undefined ? undefined : canonicalLanguage(change.defaultLanguage);
        if (language === null) throw new DomainError('invalid', `${change.defaultLanguage} is not a BCP 47 language tag`);
        const limits: RateLimitOverrides = { apiTokenRequests: changedLimit('apiTokenRequests'), userTokenRequests: changedLimit('userTokenRequests') };
        for (const [field, limit] of Object.entries(limits)) {
          if (limit !== null && !(Number.isInteger(limit) && limit >= RATE_LIMIT_BOUNDS.min && limit <= RATE_LIMIT_BOUNDS.max)) {
            throw new DomainError(
              'invalid',
              `rateLimits.${field} is a whole number from ${RATE_LIMIT_BOUNDS.min} to ${RATE_LIMIT_BOUNDS.max}, or null for the default`,
            );
          }
        }
        const current = state.settings!;
        const next = { name: name ?? current.name, defaultLanguage: language ?? current.defaultLanguage, timezone: timezone ?? current.timezone };
        const events: OrganisationEvent[] = [];
        if (next.name !== current.name || next.defaultLanguage !== current.defaultLanguage || next.timezone !== current.timezone) {
          events.push({ type: 'OrganisationSettingsChanged', data: { organisationId, ...next, changedAt: now } });
        }
        // Their own event: the readers of time zones and languages have nothing to do when only a limit moves.
        if (limits.apiTokenRequests !== state.rateLimits.apiTokenRequests || limits.userTokenRequests !== state.rateLimits.userTokenRequests) {
          events.push({ type: 'OrganisationRateLimitsChanged', data: { organisationId, ...limits, changedAt: now } });
        }
        return events;
      }
      case 'RegisterDomain': {
        const organisationId = requireOrganisation(state);
        const { hostname, kind, platformDomain, verificationToken, now } = command.data;
        if (!HOSTNAME_PATTERN.test(hostname)) throw new DomainError('invalid', `${hostname} is not a valid hostname`);
        const platformSuffix = `.${platformDomain}`;
        const underPlatform = hostname.endsWith(platformSuffix);
        if (kind === 'custom-subdomain' && (!underPlatform || hostname.slice(0, -platformSuffix.length).includes('.'))) {
          throw new DomainError('invalid', `A custom subdomain is <label>.${platformDomain}`);
        }
        if (kind === 'white-label' && (underPlatform || hostname === platformDomain)) {
          throw new DomainError('invalid', `A white-label domain is outside ${platformDomain}; use a custom subdomain there`);
        }
        if (state.domains.has(hostname)) throw new DomainError('conflict', `The domain ${hostname} is already registered`);
        const registered: OrganisationEvent = { type: 'DomainRegistered', data: { organisationId, hostname, kind, verificationToken, registeredAt: now } };
        // The platform's own zone needs no proof of control: a custom subdomain is verified at once.
        if (kind === 'white-label') return [registered];
        return [registered, { type: 'DomainVerified', data: { organisationId, hostname, method: 'platform', verifiedAt: now } }];
      }
      case 'RecordDomainVerification': {
        const organisationId = requireOrganisation(state);
        const { hostname, verificationToken, outcome, now } = command.data;
        const domain = state.domains.get(hostname);
        // Removed (or removed and registered again) while this verification was under way: nothing to record.
        if (!domain || domain.verificationToken !== verificationToken) return [];
        if (domain.status === 'active' || domain.status === 'failed') return [];
        if (!outcome.verified) return [{ type: 'DomainVerificationFailed', data: { organisationId, hostname, reason: outcome.reason, failedAt: now } }];
        const activated: OrganisationEvent = { type: 'DomainActivated', data: { organisationId, hostname, activatedAt: now } };
        if (domain.status === 'verified') return [activated];
        return [{ type: 'DomainVerified', data: { organisationId, hostname, method: 'dns-txt', verifiedAt: now } }, activated];
      }
      case 'RemoveDomain': {
        const organisationId = requireOrganisation(state);
        const { hostname, now } = command.data;
        const domain = state.domains.get(hostname);
        if (!domain) throw new DomainError('not_found', `The domain ${hostname} is not one of this organisation's domains`);
        if (domain.kind === 'standard') throw new DomainError('conflict', 'The standard domain cannot be removed');
        const revocations: OrganisationEvent[] = [...state.tokens]
          .filter(([, token]) => token.domain === hostname && !token.revoked)
          .map(([tokenId]) => ({ type: 'ApiTokenRevoked', data: { organisationId, tokenId, revokedAt: now } }));
        return [{ type: 'DomainRemoved', data: { organisationId, hostname, removedAt: now } }, ...revocations];
      }
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'OrganisationCreated': {
        const { organisationId, domain, name, defaultLanguage, timezone } = event.data;
        return {
          ...state,
          organisationId,
          standardDomain: domain,
          settings: { name, defaultLanguage, timezone },
          domains: new Map([[domain, { kind: 'standard', status: 'active', verificationToken: null }]]),
        };
      }
      case 'ApiTokenIssued':
        return { ...state, tokens: new Map(state.tokens).set(event.data.tokenId, { revoked: false, domain: event.data.domain }) };
      case 'ApiTokenRevoked': {
        const token = state.tokens.get(event.data.tokenId);
        return token ? { ...state, tokens: new Map(state.tokens).set(event.data.tokenId, { ...token, revoked: true }) } : state;
      }
      case 'OrganisationSettingsChanged': {
        const { name, defaultLanguage, timezone } = event.data;
        return { ...state, settings: { name, defaultLanguage, timezone } };
      }
      case 'OrganisationRateLimitsChanged': {
        const { apiTokenRequests, userTokenRequests } = event.data;
        return { ...state, rateLimits: { apiTokenRequests, userTokenRequests } };
      }
      case 'DomainRegistered':
        return {
          ...state,
          domains: new Map(state.domains).set(event.data.hostname, {
            kind: event.data.kind,
            status: 'pending',
            verificationToken: event.data.verificationToken,
          }),
        };
      case 'DomainVerified':
        return withDomainStatus(state, event.data.hostname, 'verified');
      case 'DomainActivated':
        return withDomainStatus(state, event.data.hostname, 'active');
      case 'DomainVerificationFailed':
        return withDomainStatus(state, event.data.hostname, 'failed');
      case 'DomainRemoved': {
        const domains = new Map(state.domains);
        domains.delete(event.data.hostname);
        return { ...state, domains };
      }
    }
  },
};

function withDomainStatus(state: OrganisationState, hostname: string, status: DomainStatus): OrganisationState {
  const domain = state.domains.get(hostname);
  return domain ? { ...state, domains: new Map(state.domains).set(hostname, { ...domain, status }) } : state;
}

function requireOrganisation(state: OrganisationState): string {
  if (!state.organisationId) throw new DomainError('not_found', 'Organisation not found');
  return state.organisationId;
}

/**
 * A domain name belongs to one organisation at a time; its own stream makes the claim atomic. Releasing it
 * (when the domain is removed) lets anyone claim it again later.
 */
export type DomainNameEvent =
  | DomainEvent<'DomainClaimed', { hostname: string; organisationId: string; kind: DomainKind }>
  | DomainEvent<'DomainReleased', { hostname: string; organisationId: string }>;
export type DomainNameCommand =
  | { type: 'ClaimDomain'; data: { hostname: string; organisationId: string; kind: DomainKind } }
  | { type: 'ReleaseDomain'; data: { hostname: string; organisationId: string } };

export const domainNameDecider: Decider<DomainNameCommand, DomainNameEvent, { claimedBy: string | null }> = {
  initialState: { claimedBy: null },
  decide(command, state) {
    switch (command.type) {
      case 'ClaimDomain':
        if (state.claimedBy) throw new DomainError('conflict', `The domain ${command.data.hostname} is already in use`);
        return [{ type: 'DomainClaimed', data: command.data }];
      case 'ReleaseDomain':
        if (state.claimedBy !== command.data.organisationId)
          throw new DomainError('not_found', `The domain ${command.data.hostname} is not this organisation's`);
        return [{ type: 'DomainReleased', data: command.data }];
    }
  },
  evolve(_state, event) {
    return { claimedBy: event.type === 'DomainClaimed' ? event.data.organisationId : null };
  },
};
