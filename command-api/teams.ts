import { Router } from 'express';
import { createHash } from 'node:crypto';
import {
  INVITATION_VALIDITY_MS,
  invitationDecider,
  InvitationExpired,
  inviteeDecider,
  InvitedMeanwhile,
  isEmailAddress,
  normaliseEmail,
  type InvitationEvent,
  type InviteeEvent,
} from '../domain/invitation.ts';
import { tenantOf } from '../infra/auth.ts';
import { acceptedInvitationSchema, acceptInvitationBody, inviteTeamBody, inviteTeamResponse } from '../api/contract/teams.ts';
import type { ApiDescription } from '../api/api-description.ts';
import type { EventStore } from '../infra/event-store/port.ts';
import { badRequest, HttpError } from '../infra/http/errors.ts';
import { eventMetadata, idempotencyKeyHeader, parse } from '../api/routes.ts';
import { ID_PATTERN, newId } from '../infra/ids.ts';
import { verifyInvitationToken } from '../infra/invitation-tokens.ts';
import { userTokenKey } from '../infra/user-tokens.ts';
import { aggregateStream, type CommandPart } from './command-handling.ts';
import type { ServiceContext } from '../api/context.ts';
import { runCommand } from './run-command.ts';
import { createUserParts, externalUserIdStream } from './users.ts';

function inviteeStream(organisationId: string, email: string): string {
  return `invitee-${organisationId}${createHash('sha256').update(email).digest('hex').slice(0, 32)}`;
}

/**
 * Where an address stands with the organisation's team, from the streams alone: a member when a user has it
 * as externalUserId (what accepting an invitation creates, so accepting again could only fail) or its last
 * invitation was accepted; pending while that invitation is unexpired; otherwise free to invite.
 */
async function inviteeStanding(store: EventStore, organisationId: string, email: string, now: string): Promise<'member' | 'pending' | 'free'> {
  const [[claim], [invited]] = await Promise.all([
    store.readStream(externalUserIdStream(organisationId, email), { limit: 1 }),
    store.readStream(inviteeStream(organisationId, email), { direction: 'backwards', limit: 1 }),
  ]);
  if (claim) return 'member';
  if (!invited) return 'free';
  const { invitationId, expiresAt } = (invited as unknown as InviteeEvent).data;
  const invitation = await aggregateStream(store, `invitation-${invitationId}`, invitationDecider);
  if (invitation.exists && invitation.accepted) return 'member';
  return Date.parse(now) < Date.parse(expiresAt) ? 'pending' : 'free';
}

/** An address invited by a concurrent request is decided again at most this many times in all. */
const MAX_INVITE_DECISIONS = 3;

/** One result per address, in request order, and the parts that invite the free ones. */
function inviteDecision(emails: string[], standing: Map<string, 'member' | 'pending' | 'free'>, organisationId: string, actor: string, now: string) {
  const seen = new Set<string>();
  const parts: CommandPart[] = [];
  const results = emails.map((email) => {
    const normalised = normaliseEmail(email);
    const refuse = (message: string) => ({ email, success: false, message });
    if (!isEmailAddress(normalised)) return refuse('Not a valid e-mail address');
    if (seen.has(normalised)) return refuse('Listed more than once in this request');
    seen.add(normalised);
    if (standing.get(normalised) === 'member') return refuse('Already a member of the team');
    if (standing.get(normalised) === 'pending') return refuse('Already invited; the invitation is pending');
    const invitationId = newId();
    const expiresAt = new Date(Date.parse(now) + INVITATION_VALIDITY_MS).toISOString();
    parts.push(
      {
        stream: `invitation-${invitationId}`,
        newStream: true,
        decider: invitationDecider,
        command: { type: 'SendInvitation', data: { invitationId, organisationId, email: normalised, actor, now } },
      },
      {
        stream: inviteeStream(organisationId, normalised),
        decider: inviteeDecider,
        command: { type: 'ReserveInvitee', data: { invitationId, expiresAt, now } },
      },
    );
    return { email, success: true, message: 'Invitation sent' };
  });
  return { parts, results };
}

export function teamCommands(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();
  const tokenKey = userTokenKey(ctx.config);

  admin.route(
    router,
    {
      method: 'post',
      path: '/teams/invite',
      operationId: 'inviteTeamMembers',
      tag: 'Teams',
      summary: 'Invite people to the organisation’s team by e-mail',
      description:
        'Per address: not an e-mail address, already a team member (the organisation has a user whose externalUserId is that address, as accepting an invitation creates, or an invitation to it was accepted), already invited and pending, or listed twice → `success: false` with a message; otherwise `TeamInvitationSent` on `invitation-<id>` and an e-mail with a single-use acceptance link valid for 7 days. Addresses compare case-insensitively. `success` is true when every address was invited.',
      body: inviteTeamBody,
      headers: [idempotencyKeyHeader],
      responses: { 200: { description: 'One result per address, in request order', schema: inviteTeamResponse } },
    },
    async (req, res) => {
      const { emails } = parse(inviteTeamBody, req.body);
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      const candidates = [...new Set(emails.map(normaliseEmail).filter(isEmailAddress))];
      // Decided on the addresses' standing as read now; an address another request invited meanwhile fails the
      // append (`InvitedMeanwhile`), and the request decides again on a fresh reading, where it is pending.
      for (let decision = 1; ; decision++) {
        const standing = new Map(
          await Promise.all(candidates.map(async (email) => [email, await inviteeStanding(ctx.store, organisationId, email, occurredAt!)] as const)),
        );
        const { parts, results } = inviteDecision(emails, standing, organisationId, actor!, occurredAt!);
        const sent = results.filter((result) => result.success).length;
        try {
          await runCommand(ctx, req, res, {
            parts,
            respond: () => ({
              status: 200,
              body: { success: sent === results.length, results, message: `${sent} of ${results.length} invitation${results.length === 1 ? '' : 's'} sent` },
            }),
          });
          return;
        } catch (error) {
          if (!(error instanceof InvitedMeanwhile) || decision >= MAX_INVITE_DECISIONS) throw error;
        }
      }
    },
  );

  admin.route(
    router,
    {
      method: 'post',
      path: '/teams/invitations/accept',
      operationId: 'acceptTeamInvitation',
      tag: 'Teams',
      summary: 'Accept a team invitation with the token from its e-mail',
      description:
        'The organisation’s back office relays the token from the invitation link (admin family: joining the team is an admin matter, and the token is only accepted on its own organisation’s domain). Appends `TeamInvitationAccepted` and, atomically, creates the invitee as a user (`externalUserId` = the e-mail address, verified, role `team-member`). A token that is not an invitation token → 400; another organisation’s → 404; used before → 409; older than 7 days → 410 `GONE`.',
      body: acceptInvitationBody,
      headers: [idempotencyKeyHeader],
      responses: {
        200: { description: 'The invitation is accepted and the invitee is a team member', schema: acceptedInvitationSchema },
        404: { description: 'No such invitation in this organisation (`NOT_FOUND`)' },
        409: { description: 'Already accepted, or a user with this e-mail as externalUserId exists (`CONFLICT`)' },
        410: { description: 'The invitation expired (`GONE`)' },
      },
    },
    async (req, res) => {
      const { token } = parse(acceptInvitationBody, req.body);
      const { organisationId } = tenantOf(res);
      const { occurredAt } = eventMetadata(req, res);
      const claims = await verifyInvitationToken(tokenKey, token);
      if (!claims || !ID_PATTERN.test(claims.invitationId)) throw badRequest([{ message: 'token: not a valid invitation token', path: ['token'] }]);
      const stream = `invitation-${claims.invitationId}`;
      const invited = (await ctx.store.readStream(stream, { limit: 1 }))[0]?.data as InvitationEvent['data'] | undefined;
      const userId = newId();
      const parts: CommandPart[] = [
        { stream, decider: invitationDecider, command: { type: 'AcceptInvitation', data: { organisationId, now: occurredAt! } } },
        ...(invited && invited.organisationId === organisationId
          ? createUserParts({
              userId,
              organisationId,
              externalUserId: invited.email,
              profile: {
                username: null,
                displayName: null,
                email: invited.email,
                emailVerified: true,
                fullName: null,
                parentEmail: null,
                locale: null,
                bio: null,
                profilePictureUrl: null,
                roles: ['team-member'],
                isAnonymous: false,
                birthDay: null,
                birthMonth: null,
                birthYear: null,
                socialHandles: { instagram: null, loyaltyCardNumber: null, tiktok: null },
                communityIds: [],
              },
              now: occurredAt!,
            })
          : []),
      ];
      try {
        await runCommand(ctx, req, res, {
          parts,
          respond: ([events]) => {
            const accepted = (events as InvitationEvent[])[0]!.data;
            return { status: 200, body: { invitationId: accepted.invitationId, email: accepted.email, userId, acceptedAt: occurredAt! } };
          },
        });
      } catch (error) {
        if (error instanceof InvitationExpired) throw new HttpError(410, 'GONE', error.message);
        throw error;
      }
    },
  );

  return router;
}
