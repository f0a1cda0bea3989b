import nodemailer from 'nodemailer';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signInvitationToken } from '../infra/invitation-tokens.ts';
import { userTokenKey } from '../infra/user-tokens.ts';
import { startTestService, type TestService, type Tenant } from './support/service.ts';

describe('team invitations', () => {
  let t: TestService;
  let acme: Tenant;
  const sent: { to: string; text: string }[] = [];
  const capture = nodemailer.createTransport({
    name: 'capture',
    version: '1',
    send(mail, done) {
      sent.push({ to: String(mail.data.to), text: String(mail.data.text) });
      done(null, { envelope: mail.message.getEnvelope(), messageId: mail.message.messageId() });
    },
  });
  const admin = (path: string, body: unknown, token = acme.token) =>
    t.request('POST', `/api/v2/admin${path}`, { host: acme.domain, headers: { 'x-api-token': token }, body });
  const runJobs = async () => {
    await t.settle();
    await t.service.jobs.runDue();
    await t.settle();
  };
  const tokenIn = (text: string) => decodeURIComponent(/token=([^\s]+)/.exec(text)![1]!);

  beforeAll(async () => {
    t = await startTestService({ jobs: false, outside: { mailTransport: capture } });
    acme = await t.createOrganisation('acme');
  });
  afterAll(async () => {
    await t.close();
  });

  it('invites each valid address once, says why for the others, and e-mails one link per invitation even when the job runs twice', async () => {
    const response = await admin('/teams/invite', { emails: ['Ann@Example.com', 'not-an-address', 'bob@example.com', 'ann@example.com'] });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      success: false,
      results: [
        { email: 'Ann@Example.com', success: true, message: 'Invitation sent' },
        { email: 'not-an-address', success: false, message: 'Not a valid e-mail address' },
        { email: 'bob@example.com', success: true, message: 'Invitation sent' },
        { email: 'ann@example.com', success: false, message: 'Listed more than once in this request' },
      ],
      message: '2 of 4 invitations sent',
    });
    await runJobs();
    expect(sent.map((mail) => mail.to).sort()).toEqual(['ann@example.com', 'bob@example.com']);
    await sql`update scheduled_jobs set status = 'pending' where kind = 'invitation-email'`.execute(t.service.database.db);
    await runJobs();
    expect(sent).toHaveLength(2);
    expect(sent[0]!.text).toContain(`https://${acme.domain}/invitations/accept?token=`);
    const again = await admin('/teams/invite', { emails: ['ann@example.com'] });
    expect(again.body).toEqual({
      success: false,
      results: [{ email: 'ann@example.com', success: false, message: 'Already invited; the invitation is pending' }],
      message: '0 of 1 invitation sent',
    });
  });

  it('requests racing to invite one address send one invitation; the others are refused', async () => {
    const responses = await Promise.all(Array.from({ length: 6 }, () => admin('/teams/invite', { emails: ['race@example.com'] })));
    const invited = responses.filter((response) => response.status === 200 && response.body.success);
    expect(invited).toHaveLength(1);
    for (const response of responses.filter((r) => !(r.status === 200 && r.body.success))) {
      expect(response.status).toBe(200);
      expect(response.body.results[0].message).toBe('Already invited; the invitation is pending');
    }
    await t.settle();
    const rows = await t.service.database.db.selectFrom('team_invitations').select('email').where('email', '=', 'race@example.com').execute();
    expect(rows).toHaveLength(1);
  });

  it('a request that loses the race for one address still invites its others, and answers that one as pending', async () => {
    const responses = await Promise.all(
      Array.from({ length: 8 }, (_, i) => admin('/teams/invite', { emails: ['shared@example.com', `own-${i}@example.com`] })),
    );
    expect(responses.map((response) => response.status)).toEqual(Array(8).fill(200));
    const shared = responses.map((response) => response.body.results[0]);
    expect(shared.filter((result: { success: boolean }) => result.success)).toHaveLength(1);
    for (const result of shared.filter((result: { success: boolean }) => !result.success))
      expect(result.message).toBe('Already invited; the invitation is pending');
    for (const response of responses) expect(response.body.results[1]).toMatchObject({ success: true, message: 'Invitation sent' });
    await t.settle();
    const rows = await t.service.database.db
      .selectFrom('team_invitations')
      .select('email')
      .where('email', 'like', '%@example.com')
      .where('email', 'like', 'own-%')
      .execute();
    expect(rows).toHaveLength(8);
  });

  it('accepting makes the invitee a team member; a second use → 409; then inviting them again says they are a member', async () => {
    const mail = sent.find((m) => m.to === 'bob@example.com')!;
    const accepted = await admin('/teams/invitations/accept', { token: tokenIn(mail.text) });
    expect(accepted.status).toBe(200);
    expect(accepted.body).toEqual({
      invitationId: expect.stringMatching(/^[0-9a-f]{24}$/),
      email: 'bob@example.com',
      userId: expect.stringMatching(/^[0-9a-f]{24}$/),
      acceptedAt: expect.any(String),
    });
    expect((await admin('/teams/invitations/accept', { token: tokenIn(mail.text) })).status).toBe(409);
    await t.settle();
    const user = await t.service.database.db.selectFrom('users').selectAll().where('id', '=', accepted.body.userId).executeTakeFirstOrThrow();
    expect([user.organisation_id, user.email]).toEqual([acme.organisationId, 'bob@example.com']);
    const again = await admin('/teams/invite', { emails: ['BOB@example.com'] });
    expect(again.body.results).toEqual([{ email: 'BOB@example.com', success: false, message: 'Already a member of the team' }]);
  });

  it('an expired invitation → 410; a forged token → 400; another organisation’s → 404', async () => {
    const invited = await admin('/teams/invite', { emails: ['late@example.com'] });
    expect(invited.body.success).toBe(true);
    await runJobs();
    const row = await t.service.database.db.selectFrom('team_invitations').select(['id']).where('email', '=', 'late@example.com').executeTakeFirstOrThrow();
    const stream = await t.service.store.readStream(`invitation-${row.id}`);
    expect(stream.map((e) => e.type)).toEqual(['TeamInvitationSent', 'TeamInvitationEmailed']);
    const eightDaysAgo = new Date(Date.now() - 8 * 24 * 3600 * 1000).toISOString();
    const oldId = `${Math.floor(Date.parse(eightDaysAgo) / 1000).toString(16)}${'0'.repeat(16)}`;
    await t.service.store.append(`invitation-${oldId}`, [
      {
        type: 'TeamInvitationSent',
        data: {
          invitationId: oldId,
          organisationId: acme.organisationId,
          email: 'old@example.com',
          invitedBy: 'test',
          sentAt: eightDaysAgo,
          expiresAt: new Date(Date.parse(eightDaysAgo) + 7 * 24 * 3600 * 1000).toISOString(),
        },
      },
    ]);
    const key = userTokenKey(t.service.config);
    const expired = await admin('/teams/invitations/accept', {
      token: await signInvitationToken(key, { invitationId: oldId, organisationId: acme.organisationId }),
    });
    expect(expired.status).toBe(410);
    expect(expired.body.code).toBe('GONE');
    expect((await admin('/teams/invitations/accept', { token: 'eyJhbGciOiJIUzI1NiJ9.e30.forged' })).status).toBe(400);
    const beta = await t.createOrganisation('beta');
    const foreign = await t.request('POST', '/api/v2/admin/teams/invitations/accept', {
      host: beta.domain,
      headers: { 'x-api-token': beta.token },
      body: { token: await signInvitationToken(key, { invitationId: row.id, organisationId: acme.organisationId }) },
    });
    expect(foreign.status).toBe(404);
  });

  it('refuses invalid bodies with 400 and no event; no token → 401', async () => {
    await t.settle();
    const before = await t.eventCount();
    for (const body of [
      {},
      { emails: [] },
      { emails: 'a@example.com' },
      { emails: [42] },
      { emails: Array.from({ length: 101 }, (_, i) => `u${i}@example.com`) },
    ]) {
      const response = await admin('/teams/invite', body);
      expect(response.status, JSON.stringify(body).slice(0, 40)).toBe(400);
      expect(response.body.code).toBe('BAD_REQUEST');
    }
    expect((await admin('/teams/invitations/accept', {})).status).toBe(400);
    expect(await t.eventCount()).toBe(before);
    expect((await admin('/teams/invite', { emails: ['a@example.com'] }, 'eng_00000000_nope')).status).toBe(401);
  });
});
