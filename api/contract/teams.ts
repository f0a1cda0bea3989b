import { z } from 'zod';

export const MAX_INVITATIONS_PER_REQUEST = 100;

export const inviteTeamBody = z
  .object({
    emails: z
      .array(z.string().max(320))
      .min(1)
      .max(MAX_INVITATIONS_PER_REQUEST)
      .describe('1 to 100 addresses; each gets its own result (an invalid address is a failed result, not a 400)'),
  })
  .meta({ id: 'InviteTeam' });

export const inviteTeamResponse = z
  .object({
    success: z.boolean().describe('true when every address was invited'),
    results: z.array(z.object({ email: z.string(), success: z.boolean(), message: z.string() })),
    message: z.string(),
  })
  .meta({ id: 'InviteTeamResult' });

export const acceptInvitationBody = z
  .object({ token: z.string().min(1).max(4096).describe('the token from the invitation link') })
  .meta({ id: 'AcceptInvitation' });

export const acceptedInvitationSchema = z
  .object({ invitationId: z.string(), email: z.string(), userId: z.string().describe('the new team member'), acceptedAt: z.string() })
  .meta({ id: 'AcceptedInvitation' });
