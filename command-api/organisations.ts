import { z } from 'zod';
import { API_FAMILIES, domainNameDecider, organisationDecider, SLUG_PATTERN, standardDomain } from '../domain/organisation.ts';
import { generateApiToken } from '../infra/auth.ts';
import type { EventMetadata } from '../infra/event-store/port.ts';
import { notFound, serviceUnavailable } from '../infra/http/errors.ts';
import { ID_PATTERN, newId } from '../infra/ids.ts';
import { handleCommand } from './command-handling.ts';
import type { CommandContext } from './read-port.ts';
import { ownerOf, recordTokenOwner, tokenLookupStream } from './id-lookups.ts';

/**
 * Tenancy commands, used by the `engage` CLI (directly or through the console endpoint). Each waits until
 * the tenancy read model has caught up, so a token it prints works on the very next request.
 */
export const createOrganisationInput = z.object({
  name: z.string().trim().min(1).max(200),
  slug: z.string().regex(SLUG_PATTERN, 'a slug is 1 to 63 lowercase letters, digits or inner hyphens'),
});

export async function createOrganisation(ctx: CommandContext, input: z.infer<typeof createOrganisationInput>, metadata: EventMetadata) {
  const organisationId = newId();
  const { token, prefix, secretHash } = generateApiToken();
  const tokenId = newId();
  const domain = standardDomain(input.slug, ctx.config.platformDomain);
  const now = ctx.clock.now().toISOString();
  const handled = await handleCommand(
    ctx.store,
    [
      {
        stream: `domain-${domain}`,
        decider: domainNameDecider,
        command: { type: 'ClaimDomain', data: { hostname: domain, organisationId, kind: 'standard' } },
      },
      {
        stream: `organisation-${organisationId}`,
        newStream: true,
        decider: organisationDecider,
        command: {
          type: 'CreateOrganisation',
          data: {
            organisationId,
            name: input.name,
            slug: input.slug,
            platformDomain: ctx.config.platformDomain,
            adminToken: { tokenId, prefix, secretHash },
            now,
          },
        },
      },
      recordTokenOwner(tokenId, organisationId),
    ],
    { ...metadata, organisationId },
  );
  await settle(ctx, handled.position);
  return { organisationId, domain, token, tokenId };
}

export const issueTokenInput = z.object({
  organisationId: z.string().regex(ID_PATTERN, 'must be 24 hexadecimal characters'),
  name: z.string().trim().min(1).max(100).default('api'),
  domain: z.string().toLowerCase().optional(),
  families: z
    .array(z.enum(API_FAMILIES))
    .min(1)
    .default([...API_FAMILIES]),
});

export async function issueToken(ctx: CommandContext, input: z.infer<typeof issueTokenInput>, metadata: EventMetadata) {
  const { token, prefix, secretHash } = generateApiToken();
  const tokenId = newId();
  const handled = await handleCommand(
    ctx.store,
    [
      {
        stream: `organisation-${input.organisationId}`,
        decider: organisationDecider,
        command: {
          type: 'IssueApiToken',
          data: { tokenId, name: input.name, prefix, secretHash, domain: input.domain, families: input.families, now: ctx.clock.now().toISOString() },
        },
      },
      recordTokenOwner(tokenId, input.organisationId),
    ],
    { ...metadata, organisationId: input.organisationId },
  );
  await settle(ctx, handled.position);
  const [issued] = handled.events[0] ?? [];
  const data = issued?.data as { domain: string; families: string[] };
  return { tokenId, token, domain: data.domain, families: data.families };
}

export const revokeTokenInput = z.object({ tokenId: z.string().regex(ID_PATTERN, 'must be 24 hexadecimal characters') });

export async function revokeToken(ctx: CommandContext, input: z.infer<typeof revokeTokenInput>, metadata: EventMetadata) {
  const { tokenId } = input;
  const owner = await ownerOf(ctx.store, tokenLookupStream(tokenId));
  if (!owner) throw notFound(`Token ${tokenId} not found`);
  const handled = await handleCommand(
    ctx.store,
    [{ stream: owner.stream, decider: organisationDecider, command: { type: 'RevokeApiToken', data: { tokenId, now: ctx.clock.now().toISOString() } } }],
    { ...metadata, organisationId: owner.organisationId },
  );
  await settle(ctx, handled.position);
  return { tokenId, revoked: true };
}

async function settle(ctx: CommandContext, position: string | null): Promise<void> {
  if (position === null) return;
  const reached = await ctx.reads.caughtUp(['tenancy'], position, Math.max(ctx.config.readYourWritesTimeoutMs, 10_000));
  if (!reached) throw serviceUnavailable('Written, but the tenancy read model has not caught up yet; is the projector running?');
}
