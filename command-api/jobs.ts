import type { Transporter } from 'nodemailer';
import type { Decider, DomainEvent } from '../domain/decider.ts';
import { invitationDecider, type InvitationCommand } from '../domain/invitation.ts';
import { organisationDecider, verificationRecordName, type OrganisationCommand } from '../domain/organisation.ts';
import { systemTxtResolver, type TxtResolver } from '../infra/dns.ts';
import type { EventMetadata } from '../infra/event-store/port.ts';
import { uuidFrom } from '../infra/ids.ts';
import type { JobContext, JobHandler } from '../infra/jobs.ts';
import { createMailer, type Mailer } from '../infra/mailer.ts';
import { signInvitationToken } from '../infra/invitation-tokens.ts';
import { userTokenKey } from '../infra/user-tokens.ts';
import { DOMAIN_VERIFICATION_JOB, type DomainVerificationJob } from '../process-managers/domain-verification.ts';
import { INVITATION_EMAIL_JOB } from '../projectors/invitations.ts';
import { aggregateStream, handleCommand } from './command-handling.ts';
import type { ServiceContext } from './context.ts';
import { engagementJobHandlers } from './engagement-jobs.ts';
import { webhookJobHandlers } from './webhook-jobs.ts';

/** The outside world the handlers talk to; tests inject a map of TXT records and a capturing mail transport. */
export interface OutsideWorld {
  resolveTxt?: TxtResolver;
  mailTransport?: Transporter;
}

/**
 * Attempts at finding the TXT record before a domain's verification fails for good. Not found on an earlier
 * attempt, the handler throws and the job runner retries it with its backoff; keep this at or below the
 * runner's `maxAttempts` (5 by default) so the last attempt records the failure.
 */
export const DOMAIN_VERIFICATION_ATTEMPTS = 5;

/**
 * The handlers of timed and outside work, by job kind. Process managers (in `projectors/`) schedule the
 * jobs as they read the event stream; a handler makes its effect idempotent (deterministic event ids),
 * since a job can run again after a crash.
 */
export function jobHandlers(ctx: ServiceContext, outside: OutsideWorld = {}): Record<string, JobHandler> {
  const resolveTxt = outside.resolveTxt ?? systemTxtResolver;
  const mailer = createMailer({
    smtpUrl: ctx.config.smtpUrl,
    from: `engage <no-reply@${ctx.config.platformDomain}>`,
    logger: ctx.logger,
    transport: outside.mailTransport,
  });
  return {
    [DOMAIN_VERIFICATION_JOB]: (payload: DomainVerificationJob, job) => verifyDomain(ctx, resolveTxt, payload, job),
    [INVITATION_EMAIL_JOB]: (payload: { invitationId: string }, job) => emailInvitation(ctx, mailer, payload.invitationId, job),
    ...engagementJobHandlers(ctx),
    ...webhookJobHandlers(ctx),
  };
}

async function verifyDomain(ctx: ServiceContext, resolveTxt: TxtResolver, job: DomainVerificationJob, context: JobContext): Promise<void> {
  const stream = `organisation-${job.organisationId}`;
  const state = await aggregateStream(ctx.store, stream, organisationDecider);
  const domain = state.domains.get(job.hostname);
  if (!domain || domain.verificationToken !== job.verificationToken || domain.status === 'active' || domain.status === 'failed') return;
  const record: OrganisationCommand = {
    type: 'RecordDomainVerification',
    data: { hostname: job.hostname, verificationToken: job.verificationToken, outcome: { verified: true }, now: ctx.clock.now().toISOString() },
  };
  if (domain.status === 'pending') {
    const name = verificationRecordName(job.hostname);
    let found = false;
    let problem = `no TXT record with the verification token at ${name}`;
    try {
      found = (await resolveTxt(name)).some((chunks) => chunks.join('') === job.verificationToken);
    } catch (error) {
      problem = `looking up ${name} failed: ${error instanceof Error ? error.message : String(error)}`;
    }
    if (!found) {
      if (context.attempt < DOMAIN_VERIFICATION_ATTEMPTS) throw new Error(`${problem} (attempt ${context.attempt} of ${DOMAIN_VERIFICATION_ATTEMPTS})`);
      record.data.outcome = { verified: false, reason: `${problem} after ${DOMAIN_VERIFICATION_ATTEMPTS} attempts` };
    }
  }
  await appendDecided(ctx, stream, organisationDecider, record, context.jobId, { organisationId: job.organisationId });
}

async function emailInvitation(ctx: ServiceContext, mailer: Mailer, invitationId: string, context: JobContext): Promise<void> {
  const stream = `invitation-${invitationId}`;
  const state = await aggregateStream(ctx.store, stream, invitationDecider);
  if (!state.exists || state.emailed || state.accepted) return;
  const { settings, standardDomain } = await aggregateStream(ctx.store, `organisation-${state.organisationId}`, organisationDecider);
  if (!settings || !standardDomain) throw new Error(`organisation ${state.organisationId} does not exist`);
  const organisation = { name: settings.name, domain: standardDomain };
  const token = await signInvitationToken(userTokenKey(ctx.config), { invitationId, organisationId: state.organisationId });
  const link = `https://${organisation.domain}/invitations/accept?token=${encodeURIComponent(token)}`;
  const expires = new Date(state.expiresAt).toUTCString();
  const sent = await mailer.send({
    to: state.email,
    subject: `You are invited to join ${organisation.name}`,
    text: `You have been invited to join the team of ${organisation.name}.\n\nAccept the invitation: ${link}\n\nThe link works once and expires on ${expires}.\n`,
    html: `<p>You have been invited to join the team of ${escapeHtml(organisation.name)}.</p><p><a href="${escapeHtml(link)}">Accept the invitation</a></p><p>The link works once and expires on ${expires}.</p>`,
  });
  const command: InvitationCommand = { type: 'RecordInvitationEmailed', data: { messageId: sent.messageId, now: ctx.clock.now().toISOString() } };
  await appendDecided(ctx, stream, invitationDecider, command, context.jobId, { organisationId: state.organisationId });
}

/**
 * A job's command, through the same load-decide-append path (and retries) as every other command, with
 * event ids derived from the job, so a job that runs again appends nothing new (the decider also decides
 * nothing once the outcome is recorded).
 */
export async function appendDecided<Command, Event extends DomainEvent, State>(
  ctx: ServiceContext,
  stream: string,
  decider: Decider<Command, Event, State>,
  command: Command,
  jobId: string,
  metadata: EventMetadata,
): Promise<void> {
  const stamped = { ...metadata, actor: `job:${jobId}`, causationId: jobId, correlationId: jobId, occurredAt: ctx.clock.now().toISOString() };
  await handleCommand(ctx.store, [{ stream, decider, command }], stamped, undefined, undefined, {
    eventId: (_stream, event, index) => uuidFrom(`${jobId}:${event.type}:${index}`),
  });
}

function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}
