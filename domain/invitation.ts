import { DomainError, type Decider, type DomainEvent } from './decider.ts';

/** How long an invitation link stays usable. */
export const INVITATION_VALIDITY_MS = 7 * 24 * 60 * 60 * 1000;

/** A pragmatic e-mail address check: one `@`, no spaces, a dotted domain. Deliverability is the mail server's business. */
export const EMAIL_PATTERN = /^[^\s@]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;

export function isEmailAddress(value: string): boolean {
  return value.length <= 254 && EMAIL_PATTERN.test(value);
}

/** Addresses are compared case-insensitively: `Ann@Example.com` and `ann@example.com` are one invitee. */
export function normaliseEmail(value: string): string {
  return value.trim().toLowerCase();
}

export type InvitationEvent =
  | DomainEvent<'TeamInvitationSent', { invitationId: string; organisationId: string; email: string; invitedBy: string; sentAt: string; expiresAt: string }>
  | DomainEvent<'TeamInvitationEmailed', { invitationId: string; organisationId: string; email: string; messageId: string | null; emailedAt: string }>
  | DomainEvent<'TeamInvitationAccepted', { invitationId: string; organisationId: string; email: string; acceptedAt: string }>;

export type InvitationCommand =
  | { type: 'SendInvitation'; data: { invitationId: string; organisationId: string; email: string; actor: string; now: string } }
  | { type: 'RecordInvitationEmailed'; data: { messageId: string | null; now: string } }
  | { type: 'AcceptInvitation'; data: { organisationId: string; now: string } };

export type InvitationState =
  { exists: false } | { exists: true; invitationId: string; organisationId: string; email: string; expiresAt: string; emailed: boolean; accepted: boolean };

/** Refused because the invitation's week is over: the HTTP side answers 410 Gone. */
export class InvitationExpired extends DomainError {
  constructor(expiresAt: string) {
    super('invalid', `This invitation expired at ${expiresAt}`);
    this.name = 'InvitationExpired';
  }
}

export const invitationDecider: Decider<InvitationCommand, InvitationEvent, InvitationState> = {
  initialState: { exists: false },

  decide(command, state) {
    switch (command.type) {
      case 'SendInvitation': {
        const { invitationId, organisationId, email, actor, now } = command.data;
        if (state.exists) throw new DomainError('conflict', `Invitation ${invitationId} already exists`);
        const normalised = normaliseEmail(email);
        if (!isEmailAddress(normalised)) throw new DomainError('invalid', `${email} is not an e-mail address`);
        const expiresAt = new Date(Date.parse(now) + INVITATION_VALIDITY_MS).toISOString();
        return [{ type: 'TeamInvitationSent', data: { invitationId, organisationId, email: normalised, invitedBy: actor, sentAt: now, expiresAt } }];
      }
      case 'RecordInvitationEmailed': {
        if (!state.exists) throw new DomainError('not_found', 'Invitation not found');
        if (state.emailed || state.accepted) return [];
        const { invitationId, organisationId, email } = state;
        return [
          { type: 'TeamInvitationEmailed', data: { invitationId, organisationId, email, messageId: command.data.messageId, emailedAt: command.data.now } },
        ];
      }
      case 'AcceptInvitation': {
        // Another organisation's invitation is as unknown as a missing one.
        if (!state.exists || state.organisationId !== command.data.organisationId) throw new DomainError('not_found', 'Invitation not found');
        if (state.accepted) throw new DomainError('conflict', 'This invitation has already been accepted');
        if (Date.parse(command.data.now) >= Date.parse(state.expiresAt)) throw new InvitationExpired(state.expiresAt);
        const { invitationId, organisationId, email } = state;
        return [{ type: 'TeamInvitationAccepted', data: { invitationId, organisationId, email, acceptedAt: command.data.now } }];
      }
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'TeamInvitationSent': {
        const { invitationId, organisationId, email, expiresAt } = event.data;
        return { exists: true, invitationId, organisationId, email, expiresAt, emailed: false, accepted: false };
      }
      case 'TeamInvitationEmailed':
        return state.exists ? { ...state, emailed: true } : state;
      case 'TeamInvitationAccepted':
        return state.exists ? { ...state, accepted: true } : state;
    }
  },
};

/**
 * One stream per organisation and address holds who is invited until when, so two requests inviting the
 * same address at once cannot both send: the second append meets the first's revision, decides again and
 * is refused.
 */
export type InviteeEvent = DomainEvent<'InviteeInvited', { invitationId: string; expiresAt: string }>;
export type InviteeCommand = { type: 'ReserveInvitee'; data: { invitationId: string; expiresAt: string; now: string } };
export type InviteeState = { pendingUntil: string | null };

/**
 * Another request invited the address between this request's look-up and its append: the request decides
 * again, and the address is then answered as already invited (`success: false`) beside the others.
 */
export class InvitedMeanwhile extends DomainError {
  constructor() {
    super('conflict', 'This address was invited by a concurrent request; its invitation is pending');
    this.name = 'InvitedMeanwhile';
  }
}

export const inviteeDecider: Decider<InviteeCommand, InviteeEvent, InviteeState> = {
  initialState: { pendingUntil: null },
  decide(command, state) {
    if (state.pendingUntil && Date.parse(command.data.now) < Date.parse(state.pendingUntil)) throw new InvitedMeanwhile();
    return [{ type: 'InviteeInvited', data: { invitationId: command.data.invitationId, expiresAt: command.data.expiresAt } }];
  },
  evolve(_state, event) {
    return { pendingUntil: event.data.expiresAt };
  },
};
