import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueToken, revokeToken } from '../command-api/organisations.ts';
import { runConsoleOperation } from '../cli/console-operations.ts';
import { ownerOf } from '../command-api/id-lookups.ts';
import { newId } from '../infra/ids.ts';
import { signInvitationToken } from '../infra/invitation-tokens.ts';
import { userTokenKey } from '../infra/user-tokens.ts';
import { block } from './support/programme.ts';
import { waitUntil } from './support/projections.ts';
import { asTenant, startTestService, type Tenant, type TestService } from './support/service.ts';

const rewardId = 'd'.repeat(24);
const action = (key: string) => ({ key, category: 'loyalty', details: { en: block(key) } });
const challengeBody = (communityId: string) => ({
  communityId,
  details: { en: block('Coffee lover') },
  actions: [action('coffee-ordered'), action('review-written')],
  startsAt: '2099-01-05T00:00:00Z',
  expiresAt: '2099-03-30T00:00:00Z',
});
const entry = { pointsToDistribute: 5, bonusXpToDistribute: 1, rewardsConfig: { amountToDistribute: 1, allocations: [{ rewardId, supply: 3 }] } };

/**
 * Issue 12, defect 3: a command decides on event streams only. The projector runner is stopped after the
 * organisations are set up, so no read model sees anything written here: a command that looked something up
 * in one (the action's challenge, an invitee, a token's organisation) would fail or wait.
 */
describe('commands decide on event streams, never on read models', () => {
  let t: TestService;
  let acme: Tenant;
  let beta: Tenant;
  let communityId: string;
  const post = (path: string, body: unknown, as: Tenant = acme) => t.request('POST', `/api/v2/admin${path}`, { ...asTenant(as), body });
  const patch = (path: string, body: unknown) => t.request('PATCH', `/api/v2/admin${path}`, { ...asTenant(acme), body });
  const createChallenge = async () => {
    const created = await post('/challenges', challengeBody(communityId));
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    return created.body as { id: string; actions: { id: string }[] };
  };

  beforeAll(async () => {
    t = await startTestService({ jobs: false });
    acme = await t.createOrganisation('acme');
    beta = await t.createOrganisation('beta');
    communityId = (await post('/communities', { name: 'Coffee club' })).body.id as string;
    await t.settle();
    await t.service.runner.stop();
  });
  afterAll(async () => {
    await t.close();
  });

  it('assigns a distribution to the actions of a challenge created a moment ago (10 times in a row)', async () => {
    for (let attempt = 0; attempt < 10; attempt++) {
      const challenge = await createChallenge();
      for (const { id: actionId } of challenge.actions) {
        const response = await post(`/actions/${actionId}/distribution`, entry);
        expect(response.status, JSON.stringify(response.body)).toBe(200);
        expect(response.body).toMatchObject({ actionId, pointsToDistribute: 5 });
      }
      const stored = await t.service.store.readStream(`challenge-${challenge.id}`);
      expect(stored.map((event) => event.type)).toEqual(['ChallengeCreated', 'ActionDistributionAssigned', 'ActionDistributionAssigned']);
    }
  });

  it('finds an action added by a PATCH a moment ago; an action the PATCH removed is a 404', async () => {
    const challenge = await createChallenge();
    const [kept, dropped] = challenge.actions;
    const changed = await patch(`/challenges/${challenge.id}`, { actions: [{ id: kept!.id, ...action('coffee-ordered') }, action('visit')] });
    expect(changed.status, JSON.stringify(changed.body)).toBe(200);
    const added = (changed.body.actions as { id: string }[])[1]!.id;
    expect((await post(`/actions/${added}/distribution`, entry)).status).toBe(200);
    expect((await post(`/actions/${kept!.id}/distribution`, entry)).status).toBe(200);
    const before = await t.eventCount();
    const gone = await post(`/actions/${dropped!.id}/distribution`, entry);
    expect(gone.status).toBe(404);
    expect(gone.body.code).toBe('NOT_FOUND');
    expect(await t.eventCount()).toBe(before);
  });

  it('another organisation’s action and an unknown one are 404, and nothing is appended', async () => {
    const challenge = await createChallenge();
    const before = await t.eventCount();
    for (const [actionId, as] of [
      [challenge.actions[0]!.id, beta],
      ['f'.repeat(24), acme],
    ] as const) {
      const response = await post(`/actions/${actionId}/distribution`, entry, as);
      expect(response.status).toBe(404);
      expect(response.body.code).toBe('NOT_FOUND');
    }
    expect(await t.eventCount()).toBe(before);
  });

  it('finds actions and tokens recorded before the lookups existed once `engage lookups backfill` ran', async () => {
    // What an earlier version appended: the challenge and the token, without their lookups.
    const challengeId = newId();
    const actionId = newId();
    const created = await createChallenge();
    const [recorded] = await t.service.store.readStream(`challenge-${created.id}`);
    const data = recorded!.data as { actions: { actionId: string }[] };
    const old = { ...data, challengeId, actions: [{ ...data.actions[0]!, actionId }] };
    await t.service.store.append(`challenge-${challengeId}`, [{ type: 'ChallengeCreated', data: old, metadata: { organisationId: acme.organisationId } }]);
    const tokenId = newId();
    const issued = { organisationId: acme.organisationId, tokenId, name: 'old', prefix: 'eng_old', secretHash: 'x', domain: acme.domain, families: ['admin'] };
    await t.service.store.append(`organisation-${acme.organisationId}`, [{ type: 'ApiTokenIssued', data: { ...issued, issuedAt: new Date().toISOString() } }]);
    expect((await post(`/actions/${actionId}/distribution`, entry)).status).toBe(404);

    const first = await runConsoleOperation(t.service, 'lookups.backfill', {}, 'test');
    // The ids created through the commands have their lookups already: only the two old ones are recorded.
    expect(first).toMatchObject({ recorded: 2 });
    expect((await post(`/actions/${actionId}/distribution`, entry)).status).toBe(200);
    expect(await ownerOf(t.service.store, `apitoken-${tokenId}`)).toEqual({
      id: tokenId,
      organisationId: acme.organisationId,
      stream: `organisation-${acme.organisationId}`,
    });
    const before = await t.eventCount();
    expect(await runConsoleOperation(t.service, 'lookups.backfill', {}, 'test')).toMatchObject({ recorded: 0 });
    expect(await t.eventCount()).toBe(before);
  });

  it('invites from the streams: pending, accepted and existing users are told apart at once', async () => {
    const invite = async (email: string) => {
      const response = await post('/teams/invite', { emails: [email] });
      expect(response.status, JSON.stringify(response.body)).toBe(200);
      return (response.body.results as { message: string }[])[0]!.message;
    };
    expect(await invite('ann@example.com')).toBe('Invitation sent');
    expect(await invite('Ann@Example.com')).toBe('Already invited; the invitation is pending');
    const page = await t.service.store.readAll({ filter: { eventTypes: ['TeamInvitationSent'] } });
    const sent = page.events.find((event) => (event.data as { email: string }).email === 'ann@example.com')!;
    const token = await signInvitationToken(userTokenKey(t.service.config), {
      invitationId: (sent.data as { invitationId: string }).invitationId,
      organisationId: acme.organisationId,
    });
    expect((await post('/teams/invitations/accept', { token })).status).toBe(200);
    expect(await invite('ann@example.com')).toBe('Already a member of the team');
    expect((await post('/users', { externalUserId: 'carl@example.com' })).status).toBe(201);
    expect(await invite('CARL@example.com')).toBe('Already a member of the team');
  });

  it('revokes a token whose issue no read model has seen yet', async () => {
    const metadata = { actor: 'test' };
    const stream = `organisation-${acme.organisationId}`;
    const last = async () => (await t.service.store.readStream(stream, { direction: 'backwards', limit: 1 }))[0];
    // Issuing waits for the tenancy read model, which is stopped: the token is written meanwhile.
    const issuing = issueToken(t.service, { organisationId: acme.organisationId, name: 'ci', families: ['admin'] }, metadata);
    await waitUntil(async () => ((await last())?.data as { name?: string } | undefined)?.name === 'ci', 10_000, 'the token');
    const { tokenId } = (await last())!.data as { tokenId: string };
    const revoking = revokeToken(t.service, { tokenId }, metadata);
    const outcome = await Promise.race([
      revoking.then(
        () => 'answered',
        (error: unknown) => error,
      ),
      waitUntil(async () => (await last())?.type === 'ApiTokenRevoked', 10_000, 'the revocation').then(
        () => 'revoked',
        () => 'not revoked',
      ),
    ]);
    expect(outcome).toBe('revoked');
    // Both are written; each answers once the tenancy read model has them, which it cannot while stopped.
    for (const answer of [issuing, revoking]) await expect(answer).rejects.toMatchObject({ status: 503, code: 'SERVICE_UNAVAILABLE' });
  });
});
