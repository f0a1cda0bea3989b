import { describe, it } from 'vitest';
import { invitationDecider, inviteeDecider, type InvitationEvent } from '../domain/invitation.ts';
import { given } from './support/decider-spec.ts';

const now = '2026-01-01T00:00:00.000Z';
const invitationId = 'a'.repeat(24);
const organisationId = 'b'.repeat(24);
const sent: InvitationEvent = {
  type: 'TeamInvitationSent',
  data: { invitationId, organisationId, email: 'ann@example.com', invitedBy: 'tok', sentAt: now, expiresAt: '2026-01-08T00:00:00.000Z' },
};
const emailed: InvitationEvent = {
  type: 'TeamInvitationEmailed',
  data: { invitationId, organisationId, email: 'ann@example.com', messageId: 'm1', emailedAt: now },
};
const accepted: InvitationEvent = { type: 'TeamInvitationAccepted', data: { invitationId, organisationId, email: 'ann@example.com', acceptedAt: now } };
const accept = (at = '2026-01-02T00:00:00.000Z', org = organisationId) => ({ type: 'AcceptInvitation' as const, data: { organisationId: org, now: at } });

describe('invitation decider', () => {
  it('sends an invitation to a normalised address, valid for 7 days; refuses a bad address or a second send', () => {
    given(invitationDecider, [])
      .when({ type: 'SendInvitation', data: { invitationId, organisationId, email: ' Ann@Example.com ', actor: 'tok', now } })
      .then([sent]);
    given(invitationDecider, [])
      .when({ type: 'SendInvitation', data: { invitationId, organisationId, email: 'nope', actor: 'tok', now } })
      .thenRefuses('invalid', /not an e-mail/);
    given(invitationDecider, [sent])
      .when({ type: 'SendInvitation', data: { invitationId, organisationId, email: 'ann@example.com', actor: 'tok', now } })
      .thenRefuses('conflict', /already exists/);
  });

  it('records the e-mail once', () => {
    given(invitationDecider, [sent])
      .when({ type: 'RecordInvitationEmailed', data: { messageId: 'm1', now } })
      .then([emailed]);
    given(invitationDecider, [sent, emailed])
      .when({ type: 'RecordInvitationEmailed', data: { messageId: 'm2', now } })
      .then([]);
    given(invitationDecider, [])
      .when({ type: 'RecordInvitationEmailed', data: { messageId: 'm1', now } })
      .thenRefuses('not_found', /not found/);
  });

  it('accepts once within 7 days; again → conflict; late → expired; another organisation’s → not found', () => {
    given(invitationDecider, [sent, emailed])
      .when(accept())
      .then([{ ...accepted, data: { ...accepted.data, acceptedAt: '2026-01-02T00:00:00.000Z' } }]);
    given(invitationDecider, [sent, accepted])
      .when(accept())
      .thenRefuses('conflict', /already been accepted/);
    given(invitationDecider, [sent])
      .when(accept('2026-01-08T00:00:00.000Z'))
      .thenRefuses('invalid', /expired/);
    given(invitationDecider, [sent])
      .when(accept(undefined, 'c'.repeat(24)))
      .thenRefuses('not_found', /not found/);
    given(invitationDecider, [])
      .when(accept())
      .thenRefuses('not_found', /not found/);
  });
});

describe('invitee decider (one address of one organisation)', () => {
  const reserve = (now: string) => ({ type: 'ReserveInvitee' as const, data: { invitationId: 'b'.repeat(24), expiresAt: '2026-03-08T00:00:00.000Z', now } });
  const invited = { type: 'InviteeInvited' as const, data: { invitationId: 'a'.repeat(24), expiresAt: '2026-03-08T00:00:00.000Z' } };

  it('reserves a free address', () => {
    given(inviteeDecider, [])
      .when(reserve('2026-03-01T00:00:00.000Z'))
      .then([{ type: 'InviteeInvited', data: { invitationId: 'b'.repeat(24), expiresAt: '2026-03-08T00:00:00.000Z' } }]);
  });

  it('refuses while an invitation is pending, and reserves again once it has expired', () => {
    given(inviteeDecider, [invited])
      .when(reserve('2026-03-07T23:59:59.000Z'))
      .thenRefuses('conflict', /pending/);
    given(inviteeDecider, [invited])
      .when(reserve('2026-03-08T00:00:00.000Z'))
      .then([{ type: 'InviteeInvited', data: { invitationId: 'b'.repeat(24), expiresAt: '2026-03-08T00:00:00.000Z' } }]);
  });
});
