import type { InvitationEvent } from '../domain/invitation.ts';
import { scheduleJobs, type DueJob } from '../infra/jobs.ts';
import type { Held, NullableTimestamp, Timestamp } from './columns.ts';
import { defineProjection } from './projection.ts';
import { RowBatch } from './row-batch.ts';
import { INVITATION_EMAIL_JOB } from '../domain/jobs.ts';

export interface TeamInvitationRow {
  id: string;
  organisation_id: string;
  email: string;
  status: 'pending' | 'accepted';
  invited_by: string;
  sent_at: Timestamp;
  expires_at: Timestamp;
  emailed_at: NullableTimestamp;
  accepted_at: NullableTimestamp;
}

export interface InvitationTables {
  team_invitations: TeamInvitationRow;
}

/**
 * Team invitations per organisation and e-mail address (pending, emailed, accepted), and the process
 * manager that schedules one `invitation-email` job per invitation (job id = invitation id, so a rebuild
 * of this read model schedules nothing again).
 */
export const invitationsProjection = defineProjection<InvitationTables, InvitationEvent>({
  name: 'team_invitations',
  version: 1,
  tables: ['team_invitations'],
  canHandle: ['TeamInvitationSent', 'TeamInvitationEmailed', 'TeamInvitationAccepted'],
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

  /** One read of the invitations the batch names, its events folded in log order, one upsert; one insert of the jobs. */
  async apply(db, events) {
    const invitations = new RowBatch<Held<TeamInvitationRow>>('team_invitations', ['id']);
    await invitations.load(
      db,
      events.map((event) => ({ id: event.data.invitationId })),
    );
    const jobs = new Map<string, DueJob>();
    for (const event of events) {
      switch (event.type) {
        case 'TeamInvitationSent': {
          const { data } = event;
          if (!invitations.get({ id: data.invitationId })) {
            invitations.set({
              id: data.invitationId,
              organisation_id: data.organisationId,
              email: data.email,
              status: 'pending',
              invited_by: data.invitedBy,
              sent_at: data.sentAt,
              expires_at: data.expiresAt,
              emailed_at: null,
              accepted_at: null,
            });
          }
          const id = `${INVITATION_EMAIL_JOB}:${data.invitationId}`;
          // Scheduling again is a no-op: the first schedule of an id stands.
          if (!jobs.has(id)) {
            jobs.set(id, {
              id,
              kind: INVITATION_EMAIL_JOB,
              organisationId: data.organisationId,
              payload: { invitationId: data.invitationId },
              dueAt: data.sentAt,
            });
          }
          break;
        }
        case 'TeamInvitationEmailed': {
          const row = invitations.get({ id: event.data.invitationId });
          if (row) invitations.set({ ...row, emailed_at: event.data.emailedAt });
          break;
        }
        case 'TeamInvitationAccepted': {
          const row = invitations.get({ id: event.data.invitationId });
          if (row) invitations.set({ ...row, status: 'accepted', accepted_at: event.data.acceptedAt });
          break;
        }
      }
    }
    await invitations.save(db);
    // In the batch's transaction: the job exists exactly when its invitation does.
    await scheduleJobs(db, [...jobs.values()]);
  },
});
