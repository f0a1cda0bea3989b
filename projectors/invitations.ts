import type { InvitationEvent } from '../domain/invitation.ts';
import { scheduleJob } from '../infra/jobs.ts';
import type { LegacyProjection as Projection } from './legacy.ts';

export const INVITATION_EMAIL_JOB = 'invitation-email';

/**
 * Team invitations per organisation and e-mail address (pending, emailed, accepted), and the process
 * manager that schedules one `invitation-email` job per invitation (job id = invitation id, so a rebuild
 * of this read model schedules nothing again).
 */
export const invitationsProjection: Projection = {
  name: 'team_invitations',
  version: 1,
  tables: ['team_invitations'],
  filter: { categories: ['invitation'] },
  migrations: {
    '0001_team_invitations': {
      async up(db) {
        await db.schema
          .createTable('team_invitations')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('email', 'text', (c) => c.notNull())
          .addColumn('status', 'text', (c) => c.notNull())
          .addColumn('invited_by', 'text', (c) => c.notNull())
          .addColumn('sent_at', 'timestamptz', (c) => c.notNull())
          .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
          .addColumn('emailed_at', 'timestamptz')
          .addColumn('accepted_at', 'timestamptz')
          .execute();
        await db.schema.createIndex('team_invitations_by_email').on('team_invitations').columns(['organisation_id', 'email', 'status']).execute();
        await db.schema.createIndex('team_invitations_by_sent_at').on('team_invitations').columns(['organisation_id', 'sent_at']).execute();
      },
    },
  },

  async apply(db, event) {
    const { type, data } = event as unknown as InvitationEvent;
    switch (type) {
      case 'TeamInvitationSent':
        await db
          .insertInto('team_invitations')
          .values({
            id: data.invitationId,
            organisation_id: data.organisationId,
            email: data.email,
            status: 'pending',
            invited_by: data.invitedBy,
            sent_at: data.sentAt,
            expires_at: data.expiresAt,
          })
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
        await scheduleJob(db, {
          id: `${INVITATION_EMAIL_JOB}:${data.invitationId}`,
          kind: INVITATION_EMAIL_JOB,
          organisationId: data.organisationId,
          payload: { invitationId: data.invitationId },
          dueAt: data.sentAt,
        });
        return;
      case 'TeamInvitationEmailed':
        await db.updateTable('team_invitations').set({ emailed_at: data.emailedAt }).where('id', '=', data.invitationId).execute();
        return;
      case 'TeamInvitationAccepted':
        await db.updateTable('team_invitations').set({ status: 'accepted', accepted_at: data.acceptedAt }).where('id', '=', data.invitationId).execute();
        return;
    }
  },
};
