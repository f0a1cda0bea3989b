import { z } from 'zod';
import { canonicalLanguage, canonicalTimeZone, CUSTOM_DOMAIN_KINDS, HOSTNAME_PATTERN, RATE_LIMIT_BOUNDS } from '../../domain/organisation.ts';

const hostname = z
  .string()
  .max(254)
  .trim()
  .toLowerCase()
  .transform((value) => value.replace(/\.$/, ''))
  .pipe(
    z
      .string()
      .regex(HOSTNAME_PATTERN, 'must be a hostname such as shop.example.com')
      // A top-level label is never all digits (RFC 3696): `127.0.0.1` is an address, not a domain to verify.
      .refine((value) => !/(^|\.)[0-9]+$/.test(value), 'must be a hostname, not an IP address'),
  );

export const registerDomainBody = z
  .object({
    hostname,
    kind: z.enum(CUSTOM_DOMAIN_KINDS).describe('`custom-subdomain`: `<label>.<platform domain>`; `white-label`: any other hostname you control'),
  })
  .meta({ id: 'RegisterDomain' });

export const removeDomainBody = z.object({ hostname }).meta({ id: 'RemoveDomain' });

const verificationSchema = z
  .object({
    type: z.literal('TXT'),
    name: z.string().describe('`_engage-verification.<hostname>`'),
    value: z.string().describe('publish this exact value as a TXT record at `name`'),
  })
  .meta({ id: 'DomainVerification' });

export const registeredDomainSchema = z
  .object({
    hostname: z.string(),
    kind: z.enum(CUSTOM_DOMAIN_KINDS),
    status: z.enum(['pending', 'verified']).describe('`pending` until the TXT record is found; a custom subdomain is `verified` at once'),
    verification: verificationSchema,
    createdAt: z.string(),
  })
  .meta({ id: 'RegisteredDomain' });

export const domainSchema = z
  .object({
    hostname: z.string(),
    kind: z.enum(['standard', ...CUSTOM_DOMAIN_KINDS]),
    status: z.enum(['pending', 'verified', 'active', 'failed']),
    verification: verificationSchema.nullable().describe('null for the standard domain'),
    failureReason: z.string().nullable().describe('why verification failed, when `status` is `failed`'),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'Domain' });

export const domainListSchema = z.object({ totalCount: z.number().int().min(0), edges: z.array(domainSchema) }).meta({ id: 'DomainList' });

export const removedDomainSchema = z
  .object({ hostname: z.string(), removed: z.literal(true), revokedTokenIds: z.array(z.string()) })
  .meta({ id: 'RemovedDomain' });

const rateLimitsSchema = z
  .object({
    windowSeconds: z.number().int().describe('the window every limit counts over (the operator’s `RATE_LIMIT_WINDOW_SECONDS`)'),
    apiTokenRequests: z.number().int().describe('requests per window each API token of the organisation may make'),
    userTokenRequests: z.number().int().describe('requests per window each signed-in user (user token) may make'),
  })
  .describe('The limits in force: the organisation’s own where it set them, else the platform defaults')
  .meta({ id: 'OrganisationRateLimits' });

const rateLimit = z
  .number()
  .int()
  .min(RATE_LIMIT_BOUNDS.min)
  .max(RATE_LIMIT_BOUNDS.max)
  .nullable()
  .optional()
  .describe('requests per window; `null` goes back to the platform default');

const changeRateLimitsBody = z
  .strictObject({ apiTokenRequests: rateLimit, userTokenRequests: rateLimit })
  .refine((body) => Object.values(body).some((value) => value !== undefined), 'change at least one of apiTokenRequests, userTokenRequests')
  .meta({ id: 'ChangeOrganisationRateLimits' });

export const settingsSchema = z
  .object({
    organisationId: z.string(),
    name: z.string(),
    slug: z.string(),
    domain: z.string().describe('the standard domain'),
    defaultLanguage: z.string().describe('BCP 47, canonical form'),
    timezone: z.string().describe('IANA time zone'),
    rateLimits: rateLimitsSchema,
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'OrganisationSettings' });

export const changeSettingsBody = z
  .strictObject({
    name: z.string().trim().min(1).max(200).optional(),
    timezone: z
      .string()
      .max(64)
      .refine((value) => canonicalTimeZone(value) !== null, 'must be an IANA time zone such as Europe/Brussels')
      .optional(),
    defaultLanguage: z
      .string()
      .max(35)
      .refine((value) => canonicalLanguage(value) !== null, 'must be a BCP 47 language tag such as en or nl-BE')
      .optional(),
    rateLimits: changeRateLimitsBody.optional(),
  })
  .refine((body) => Object.values(body).some((value) => value !== undefined), 'change at least one of name, timezone, defaultLanguage, rateLimits')
  .meta({ id: 'ChangeOrganisationSettings' });
