import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userTokenKey } from '../infra/user-tokens.ts';
import { startTestService, type TestService, type Tenant } from './support/service.ts';

const TEAM_MEMBER_FIELDS = [
  'bio',
  'birthDay',
  'birthMonth',
  'birthYear',
  'communityData',
  'createdAt',
  'displayName',
  'email',
  'emailVerified',
  'externalUserId',
  'fullName',
  'id',
  'isAnonymous',
  'keys',
  'locale',
  'organisationId',
  'parentEmail',
  'points',
  'profilePictureUrl',
  'roles',
  'socialHandles',
  'updatedAt',
  'username',
  'xp',
];
const zeroXp = { total: 0, knowledge: 0, creativity: 0, loyalty: 0, influence: 0, participation: 0, contribution: 0 };

describe('users, team members and user tokens over HTTP', () => {
  let t: TestService;
  let acme: Tenant;
  let beta: Tenant;
  let runners: string;
  let swimmers: string;
  let betaCommunity: string;
  const as = (tenant: Tenant, extra: Record<string, string> = {}) => ({ host: tenant.domain, headers: { 'x-api-token': tenant.token, ...extra } });
  const after = (tenant: Tenant, response: { headers: Record<string, unknown> }) =>
    as(tenant, { 'x-min-position': response.headers['x-event-position'] as string });
  const createUser = (tenant: Tenant, body: Record<string, unknown>) => t.request('POST', '/api/v2/admin/users', { ...as(tenant), body });
  const community = async (tenant: Tenant, name: string) =>
    (await t.request('POST', '/api/v2/admin/communities', { ...as(tenant), body: { name } })).body.id as string;

  beforeAll(async () => {
    t = await startTestService();
    acme = await t.createOrganisation('acme');
    beta = await t.createOrganisation('beta');
    runners = await community(acme, 'Runners');
    swimmers = await community(acme, 'Swimmers');
    betaCommunity = await community(beta, 'Beta');
  });
  afterAll(async () => {
    await t.close();
  });

  const full = {
    externalUserId: 'crm-0001',
    username: 'ada',
    displayName: 'Ada L.',
    email: 'ada@example.com',
    emailVerified: true,
    fullName: 'Ada Lovelace',
    parentEmail: 'byron@example.com',
    locale: 'en-GB',
    bio: 'Analyst',
    profilePictureUrl: 'https://img.example/ada.png',
    roles: ['member', 'captain'],
    birthDay: 10,
    birthMonth: 12,
    birthYear: 1990,
    socialHandles: { instagram: '@ada', loyaltyCardNumber: 'LC-1', tiktok: '@ada.t' },
  };

  it('POST /users: 201 with the team member record, every field; claim and user appended together', async () => {
    const response = await createUser(acme, { ...full, communityIds: [runners, swimmers] });
    expect(response.status).toBe(201);
    const member = response.body;
    expect(Object.keys(member).sort()).toEqual(TEAM_MEMBER_FIELDS);
    expect(member.id).toMatch(/^[0-9a-f]{24}$/);
    expect(member).toMatchObject({
      username: 'ada',
      displayName: 'Ada L.',
      bio: 'Analyst',
      profilePictureUrl: 'https://img.example/ada.png',
      locale: 'en-GB',
      fullName: 'Ada Lovelace',
      parentEmail: 'byron@example.com',
      email: 'ada@example.com',
      organisationId: acme.organisationId,
      externalUserId: 'crm-0001',
      points: 0,
      keys: 0,
      xp: zeroXp,
      roles: ['member', 'captain'],
      isAnonymous: false,
      birthDay: 10,
      birthMonth: 12,
      birthYear: 1990,
      socialHandles: full.socialHandles,
    });
    expect(member.emailVerified).toBe(member.createdAt);
    expect(member.updatedAt).toBe(member.createdAt);
    expect(member.communityData).toEqual(
      [runners, swimmers].map((communityId) => ({
        communityId,
        streak: { currentStreak: 0, lastExtendedAt: null, longestStreak: 0 },
        challengesCompleted: 0,
        achievementsCompleted: 0,
        points: 0,
        xp: zeroXp,
        hasAcceptedRules: false,
      })),
    );
    const stored = await t.service.store.readStream(`user-${member.id}`);
    expect(stored.map((event) => event.type)).toEqual(['UserCreated']);
    expect(stored[0]!.metadata).toMatchObject({ organisationId: acme.organisationId });

    const read = await t.request('GET', `/api/v2/admin/users/${member.id}`, after(acme, response));
    expect(read.status).toBe(200);
    expect(read.body).toEqual(member);
  });

  it('POST /users with only an externalUserId: every field present, null or empty', async () => {
    const response = await createUser(acme, { externalUserId: 'crm-minimal' });
    expect(response.status).toBe(201);
    expect(Object.keys(response.body).sort()).toEqual(TEAM_MEMBER_FIELDS);
    expect(response.body).toMatchObject({
      username: null,
      displayName: null,
      bio: null,
      profilePictureUrl: null,
      emailVerified: null,
      locale: null,
      fullName: null,
      parentEmail: null,
      email: null,
      roles: [],
      birthDay: null,
      birthMonth: null,
      birthYear: null,
      socialHandles: { instagram: null, loyaltyCardNumber: null, tiktok: null },
      communityData: [],
    });
  });

  it('a taken externalUserId → 409 and nothing appended; another organisation may use it; concurrent creations: one wins', async () => {
    await createUser(acme, { externalUserId: 'crm-dup' });
    const before = await t.eventCount();
    const again = await createUser(acme, { externalUserId: 'crm-dup', username: 'other' });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('CONFLICT');
    expect(await t.eventCount()).toBe(before);
    expect((await createUser(beta, { externalUserId: 'crm-dup' })).status).toBe(201);
    const raced = await Promise.all(Array.from({ length: 5 }, () => createUser(acme, { externalUserId: 'crm-race' })));
    expect(raced.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409]);
  });

  const invalid: [string, Record<string, unknown>, string][] = [
    ['externalUserId missing', { username: 'x' }, 'externalUserId'],
    ['externalUserId empty', { externalUserId: '' }, 'externalUserId'],
    ['externalUserId not a string', { externalUserId: 12 }, 'externalUserId'],
    ['email not an address', { externalUserId: 'x', email: 'ada' }, 'email'],
    ['parentEmail not an address', { externalUserId: 'x', parentEmail: 'byron' }, 'parentEmail'],
    ['locale not a language tag', { externalUserId: 'x', locale: 'English' }, 'locale'],
    ['profilePictureUrl not a URL', { externalUserId: 'x', profilePictureUrl: 'ada.png' }, 'profilePictureUrl'],
    ['roles not an array', { externalUserId: 'x', roles: 'admin' }, 'roles'],
    ['a role empty', { externalUserId: 'x', roles: [''] }, 'roles.0'],
    ['birthDay 0', { externalUserId: 'x', birthDay: 0 }, 'birthDay'],
    ['birthDay 32', { externalUserId: 'x', birthDay: 32 }, 'birthDay'],
    ['birthMonth 13', { externalUserId: 'x', birthMonth: 13 }, 'birthMonth'],
    ['birthYear in the future', { externalUserId: 'x', birthYear: 3000 }, 'birthYear'],
    ['birthYear not whole', { externalUserId: 'x', birthYear: 1990.5 }, 'birthYear'],
    ['socialHandles with an unknown handle', { externalUserId: 'x', socialHandles: { myspace: 'ada' } }, 'socialHandles'],
    ['communityIds not 24 hex', { externalUserId: 'x', communityIds: ['runners'] }, 'communityIds.0'],
    ['externalUserId given with an unknown field', { externalUserId: 'x', points: 100 }, ''],
    ['emailVerified not a boolean', { externalUserId: 'x', email: 'a@example.com', emailVerified: 'yes' }, 'emailVerified'],
  ];

  it.each(invalid)('POST /users: %s → 400 with issues, and no event appended', async (_case, body, path) => {
    const before = await t.eventCount();
    const response = await createUser(acme, body);
    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ code: 'BAD_REQUEST', message: 'Invalid input data' });
    expect(response.body.issues.map((issue: { path: unknown[] }) => issue.path.join('.'))).toContain(path);
    expect(await t.eventCount()).toBe(before);
  });

  it('POST /users: domain rules → 400 with issues and no event (unknown community, another organisation’s community, impossible birthday, verified without address)', async () => {
    const before = await t.eventCount();
    for (const body of [
      { externalUserId: 'rule-1', communityIds: ['f'.repeat(24)] },
      { externalUserId: 'rule-2', communityIds: [runners, betaCommunity] },
      { externalUserId: 'rule-3', birthDay: 30, birthMonth: 2 },
      { externalUserId: 'rule-4', emailVerified: true },
    ]) {
      const response = await createUser(acme, body);
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(response.body.code).toBe('BAD_REQUEST');
      expect(response.body.issues.length).toBeGreaterThan(0);
    }
    expect(await t.eventCount()).toBe(before);
  });

  it('PATCH /users/{id}: changes what is given, merges social handles, unverifies a new address, replaces communities', async () => {
    const created = await createUser(acme, { ...full, externalUserId: 'crm-patch', communityIds: [runners] });
    const id = created.body.id;
    const patched = await t.request('PATCH', `/api/v2/admin/users/${id}`, {
      ...as(acme),
      body: { displayName: 'Countess', bio: null, email: 'countess@example.com', socialHandles: { tiktok: null }, communityIds: [swimmers] },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({
      id,
      externalUserId: 'crm-patch',
      displayName: 'Countess',
      bio: null,
      email: 'countess@example.com',
      emailVerified: null,
      username: 'ada',
      socialHandles: { instagram: '@ada', loyaltyCardNumber: 'LC-1', tiktok: null },
    });
    expect(patched.body.communityData.map((entry: { communityId: string }) => entry.communityId)).toEqual([swimmers]);
    expect(patched.body.createdAt).toBe(created.body.createdAt);
    const read = await t.request('GET', `/api/v2/admin/users/${id}`, after(acme, patched));
    expect(read.body).toEqual(patched.body);

    const verified = await t.request('PATCH', `/api/v2/admin/users/${id}`, { ...as(acme), body: { emailVerified: true } });
    expect(Number.isNaN(Date.parse(verified.body.emailVerified))).toBe(false);

    const before = await t.eventCount();
    const same = await t.request('PATCH', `/api/v2/admin/users/${id}`, { ...as(acme), body: { displayName: 'Countess' } });
    expect(same.status).toBe(200);
    expect(same.body).toEqual(verified.body);
    expect(await t.eventCount()).toBe(before);
  });

  it('PATCH /users/{id}: 400 and no event for bad input, an unknown community or externalUserId; 404 for an unknown or foreign user', async () => {
    const created = await createUser(acme, { externalUserId: 'crm-patch-bad' });
    const id = created.body.id;
    const foreign = await createUser(beta, { externalUserId: 'crm-beta' });
    const before = await t.eventCount();
    for (const [body, path] of [
      [{}, ''],
      [{ externalUserId: 'new-id' }, ''],
      [{ email: 'nope' }, 'email'],
      [{ birthMonth: 0 }, 'birthMonth'],
      [{ communityIds: [betaCommunity] }, null],
    ] as const) {
      const response = await t.request('PATCH', `/api/v2/admin/users/${id}`, { ...as(acme), body });
      expect(response.status, JSON.stringify(body)).toBe(400);
      if (path !== null) expect(response.body.issues.map((issue: { path: unknown[] }) => issue.path.join('.'))).toContain(path);
    }
    expect((await t.request('PATCH', `/api/v2/admin/users/${foreign.body.id}`, { ...as(acme), body: { bio: 'x' } })).status).toBe(404);
    expect((await t.request('PATCH', `/api/v2/admin/users/${'f'.repeat(24)}`, { ...as(acme), body: { bio: 'x' } })).status).toBe(404);
    expect((await t.request('PATCH', '/api/v2/admin/users/someone', { ...as(acme), body: { bio: 'x' } })).status).toBe(404);
    expect(await t.eventCount()).toBe(before);
  });

  it('GET /users/{id}: 404 for an unknown id or another organisation’s user', async () => {
    const foreign = await createUser(beta, { externalUserId: 'crm-beta-read' });
    expect((await t.request('GET', `/api/v2/admin/users/${foreign.body.id}`, after(acme, foreign))).status).toBe(404);
    const missing = await t.request('GET', `/api/v2/admin/users/${'f'.repeat(24)}`, as(acme));
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ code: 'NOT_FOUND' });
  });

  it('GET /users?externalUserId= finds exactly that user in this organisation; otherwise a page of users', async () => {
    const created = await createUser(acme, { externalUserId: 'crm-find%' });
    await createUser(acme, { externalUserId: 'crm-find%2' });
    const found = await t.request('GET', `/api/v2/admin/users?externalUserId=${encodeURIComponent('crm-find%')}`, after(acme, created));
    expect(found.status).toBe(200);
    expect(found.body).toEqual({ totalCount: 1, edges: [created.body] });
    expect((await t.request('GET', '/api/v2/admin/users?externalUserId=crm-find', as(acme))).body).toEqual({ totalCount: 0, edges: [] });
    expect((await t.request('GET', `/api/v2/admin/users?externalUserId=${encodeURIComponent('crm-find%')}`, as(beta))).body.totalCount).toBe(0);
    const page = await t.request('GET', '/api/v2/admin/users?limit=2', as(acme));
    expect(page.body.edges).toHaveLength(2);
    expect(page.body.totalCount).toBeGreaterThan(2);
    expect((await t.request('GET', '/api/v2/admin/users?limit=0', as(acme))).status).toBe(400);
    expect((await t.request('GET', '/api/v2/admin/users?externalUserId=', as(acme))).status).toBe(400);
  });

  describe('PUT /users/{id}/variables', () => {
    let tier: string;
    let score: string;
    let vip: string;
    let betaVariable: string;
    let userId: string;
    const put = (id: string, body: unknown, tenant = acme) => t.request('PUT', `/api/v2/admin/users/${id}/variables`, { ...as(tenant), body });

    beforeAll(async () => {
      const config = async (tenant: Tenant, key: string, type: string) =>
        (await t.request('POST', '/api/v2/admin/variable-configs', { ...as(tenant), body: { key, type } })).body.id as string;
      tier = await config(acme, 'tier', 'string');
      score = await config(acme, 'score', 'number');
      vip = await config(acme, 'vip', 'boolean');
      betaVariable = await config(beta, 'tier', 'string');
      userId = (await createUser(acme, { externalUserId: 'crm-variables' })).body.id;
    });

    it('sets exactly the given values: 200 with them, ordered by id; setting them again appends nothing', async () => {
      const response = await put(userId, {
        values: [
          { variableConfigId: vip, value: true },
          { variableConfigId: tier, value: 'gold' },
          { variableConfigId: score, value: 4.5 },
        ],
      });
      expect(response.status).toBe(200);
      expect(response.body).toEqual({
        userId,
        values: [
          { variableConfigId: tier, value: 'gold' },
          { variableConfigId: score, value: 4.5 },
          { variableConfigId: vip, value: true },
        ].sort((a, b) => a.variableConfigId.localeCompare(b.variableConfigId)),
      });
      const stored = await t.service.store.readStream(`user-${userId}`);
      expect(stored.map((event) => event.type)).toEqual(['UserCreated', 'UserVariablesSet']);
      const before = await t.eventCount();
      const again = await put(userId, { values: [...response.body.values].reverse() });
      expect(again.body).toEqual(response.body);
      expect(await t.eventCount()).toBe(before);
      const replaced = await put(userId, { values: [{ variableConfigId: tier.toUpperCase(), value: 'silver' }] });
      expect(replaced.body).toEqual({ userId, values: [{ variableConfigId: tier, value: 'silver' }] });
      expect((await put(userId, { values: [] })).body).toEqual({ userId, values: [] });
    });

    it('→ 400 and no event: a value of the wrong type, an unknown or foreign variable, a variable twice, bad shapes', async () => {
      const before = await t.eventCount();
      for (const [body, path] of [
        [{ values: [{ variableConfigId: score, value: '3' }] }, null],
        [{ values: [{ variableConfigId: vip, value: 1 }] }, null],
        [{ values: [{ variableConfigId: tier, value: false }] }, null],
        [{ values: [{ variableConfigId: 'f'.repeat(24), value: 'x' }] }, null],
        [{ values: [{ variableConfigId: betaVariable, value: 'gold' }] }, null],
        [
          {
            values: [
              { variableConfigId: tier, value: 'a' },
              { variableConfigId: tier, value: 'b' },
            ],
          },
          'values.1.variableConfigId',
        ],
        [{ values: [{ variableConfigId: 'tier', value: 'x' }] }, 'values.0.variableConfigId'],
        [{ values: [{ variableConfigId: tier, value: { nested: 1 } }] }, 'values.0.value'],
        [{ values: [{ variableConfigId: tier }] }, 'values.0.value'],
        [{}, 'values'],
      ] as const) {
        const response = await put(userId, body);
        expect(response.status, JSON.stringify(body)).toBe(400);
        expect(response.body.issues.length).toBeGreaterThan(0);
        if (path !== null) expect(response.body.issues.map((issue: { path: unknown[] }) => issue.path.join('.'))).toContain(path);
      }
      expect(await t.eventCount()).toBe(before);
    });

    it('→ 404 for an unknown user or another organisation’s', async () => {
      expect((await put('f'.repeat(24), { values: [] })).status).toBe(404);
      expect((await put(userId, { values: [] }, beta)).status).toBe(404);
    });
  });

  describe('GET /teams', () => {
    let team: Tenant;
    let red: string;
    let blue: string;
    const ids: Record<string, string> = {};
    let position = '';

    beforeAll(async () => {
      team = await t.createOrganisation('team');
      red = await community(team, 'Red');
      blue = await community(team, 'Blue');
      const people: Record<string, unknown>[] = [
        { externalUserId: 'u1', username: 'alice', displayName: 'Alice', email: 'alice@example.com', roles: ['admin'], communityIds: [red] },
        { externalUserId: 'u2', username: 'bob', displayName: 'Bobby', email: 'bob@example.com', roles: ['member'], communityIds: [red, blue] },
        { externalUserId: 'u3', username: 'carol', displayName: 'Alicia', email: 'c@example.com', roles: ['member', 'admin'], communityIds: [blue] },
        { externalUserId: 'u4', username: 'dan_x', displayName: 'Dan', email: 'ALI@example.com', roles: [], communityIds: [] },
        { externalUserId: 'u5', username: 'danny', displayName: null, email: null, roles: ['member'], communityIds: [] },
      ];
      for (const person of people) {
        const created = await createUser(team, person);
        ids[person.externalUserId as string] = created.body.id;
        position = created.headers['x-event-position'] as string;
      }
    });

    const teams = (query = '') => t.request('GET', `/api/v2/admin/teams${query}`, { ...as(team, { 'x-min-position': position }) });
    const externalIds = (body: { edges: { externalUserId: string }[] }) => body.edges.map((edge) => edge.externalUserId);

    it('lists team member records, newest first, paginated, every field present', async () => {
      const all = await teams();
      expect(all.status).toBe(200);
      expect(all.body.totalCount).toBe(5);
      expect(externalIds(all.body)).toEqual(['u5', 'u4', 'u3', 'u2', 'u1']);
      for (const member of all.body.edges) expect(Object.keys(member).sort()).toEqual(TEAM_MEMBER_FIELDS);
      const bob = all.body.edges.find((member: { externalUserId: string }) => member.externalUserId === 'u2');
      expect(bob.communityData.map((entry: { communityId: string }) => entry.communityId)).toEqual([red, blue]);
      expect(bob.emailVerified).toBeNull();
      const page = await teams('?limit=2&skip=1');
      expect(page.body.totalCount).toBe(5);
      expect(externalIds(page.body)).toEqual(['u4', 'u3']);
      for (const query of ['?limit=0', '?limit=101', '?skip=-1', '?limit=x']) expect((await teams(query)).status, query).toBe(400);
    });

    it('filters by community, by role, and by a case-insensitive prefix of username, displayName or email; filters combine', async () => {
      expect(externalIds((await teams(`?communityId=${red}`)).body)).toEqual(['u2', 'u1']);
      expect(externalIds((await teams(`?communityId=${blue.toUpperCase()}`)).body)).toEqual(['u3', 'u2']);
      expect(externalIds((await teams('?role=admin')).body)).toEqual(['u3', 'u1']);
      expect(externalIds((await teams('?role=Admin')).body)).toEqual([]);
      expect(externalIds((await teams('?search=ali')).body)).toEqual(['u4', 'u3', 'u1']);
      expect(externalIds((await teams('?search=DAN')).body)).toEqual(['u5', 'u4']);
      expect(externalIds((await teams('?search=dan_')).body)).toEqual(['u4']);
      expect(externalIds((await teams('?search=%25')).body)).toEqual([]);
      expect(externalIds((await teams('?search=bob%40')).body)).toEqual(['u2']);
      const combined = await teams(`?communityId=${blue}&role=member&search=b`);
      expect(combined.body).toMatchObject({ totalCount: 1 });
      expect(externalIds(combined.body)).toEqual(['u2']);
    });

    it('→ 400 for a malformed filter; 404 for a community the organisation does not have', async () => {
      for (const query of ['?communityId=red', '?role=', '?search=', `?search=${'s'.repeat(101)}`]) {
        const response = await teams(query);
        expect(response.status, query).toBe(400);
        expect(response.body.code).toBe('BAD_REQUEST');
      }
      expect((await teams(`?communityId=${'f'.repeat(24)}`)).status).toBe(404);
      expect((await teams(`?communityId=${runners}`)).status).toBe(404);
    });

    it('never shows another organisation’s members', async () => {
      const list = await t.request('GET', '/api/v2/admin/teams?limit=100', as(acme, { 'x-min-position': position }));
      expect(list.body.edges.map((edge: { organisationId: string }) => edge.organisationId)).not.toContain(team.organisationId);
      expect(list.body.edges.map((edge: { externalUserId: string }) => edge.externalUserId)).not.toContain('u1');
    });
  });

  describe('user tokens and GET /integration/me', () => {
    let member: Record<string, any>;
    let position = '';
    const issue = (userId: string, body?: unknown, tenant = acme) => t.request('POST', `/api/v2/admin/users/${userId}/tokens`, { ...as(tenant), body });
    const me = (userToken: string | null, tenant = acme, extra: Record<string, string> = {}) =>
      t.request('GET', '/api/v2/integration/me', {
        ...as(tenant, { ...(userToken !== null ? { authorization: `Bearer ${userToken}` } : {}), 'x-min-position': position, ...extra }),
      });

    beforeAll(async () => {
      const created = await createUser(acme, { externalUserId: 'crm-me', username: 'me', communityIds: [runners] });
      member = created.body;
      position = created.headers['x-event-position'] as string;
    });

    it('issues a token (default one hour) that signs the user in: /me is their team member record', async () => {
      const before = await t.eventCount();
      const issued = await issue(member.id);
      expect(issued.status).toBe(200);
      expect(Object.keys(issued.body).sort()).toEqual(['expiresAt', 'token']);
      expect(issued.body.token.split('.')).toHaveLength(3);
      const lifetime = Date.parse(issued.body.expiresAt) - Date.now();
      expect(lifetime).toBeGreaterThan(3500_000);
      expect(lifetime).toBeLessThanOrEqual(3600_000);
      expect(await t.eventCount()).toBe(before);
      const claims = JSON.parse(Buffer.from(issued.body.token.split('.')[1], 'base64url').toString());
      expect(claims).toMatchObject({ sub: member.id, org: acme.organisationId });
      expect(claims.exp - claims.iat).toBe(3600);

      const response = await me(issued.body.token);
      expect(response.status).toBe(200);
      expect(response.body).toEqual(member);
    });

    it('takes expiresInSeconds from 60 to 86400', async () => {
      const short = await issue(member.id, { expiresInSeconds: 60 });
      const claims = JSON.parse(Buffer.from(short.body.token.split('.')[1], 'base64url').toString());
      expect(claims.exp - claims.iat).toBe(60);
      expect((await issue(member.id, { expiresInSeconds: 86_400 })).status).toBe(200);
      for (const body of [{ expiresInSeconds: 59 }, { expiresInSeconds: 86_401 }, { expiresInSeconds: 1.5 }, { expiresInSeconds: '600' }, { scope: 'all' }]) {
        const response = await issue(member.id, body);
        expect(response.status, JSON.stringify(body)).toBe(400);
        expect(response.body.code).toBe('BAD_REQUEST');
      }
    });

    it('→ 404 for an unknown user or another organisation’s; 401 without an API token', async () => {
      expect((await issue('f'.repeat(24))).status).toBe(404);
      expect((await issue(member.id, undefined, beta)).status).toBe(404);
      expect((await t.request('POST', `/api/v2/admin/users/${member.id}/tokens`, { host: acme.domain })).status).toBe(401);
    });

    it('/me → 401 without a user token, with a malformed, tampered, expired or foreign-organisation one', async () => {
      const key = userTokenKey(t.service.config);
      const sign = (claims: Record<string, unknown>, exp: number, signingKey = key) =>
        new SignJWT(claims)
          .setProtectedHeader({ alg: 'HS256' })
          .setSubject(member.id)
          .setAudience('engage:integration')
          .setIssuedAt(exp - 120)
          .setExpirationTime(exp)
          .sign(signingKey);
      const now = Math.floor(Date.now() / 1000);
      const expired = await sign({ org: acme.organisationId }, now - 60);
      const foreign = await sign({ org: beta.organisationId }, now + 600);
      const otherKey = await sign({ org: acme.organisationId }, now + 600, new TextEncoder().encode('z'.repeat(40)));
      const valid = (await issue(member.id)).body.token as string;
      const [header, payload] = valid.split('.');
      for (const [label, token] of [
        ['none', null],
        ['malformed', 'garbage'],
        ['expired', expired],
        ['another organisation', foreign],
        ['another key', otherKey],
        ['no signature', `${header}.${payload}.`],
      ] as const) {
        const response = await me(token);
        expect(response.status, label).toBe(401);
        expect(response.body.code, label).toBe('UNAUTHORIZED');
      }
      const basic = await t.request('GET', '/api/v2/integration/me', { ...as(acme, { authorization: `Basic ${valid}` }) });
      expect(basic.status).toBe(401);
    });

    it('/me → 401 when the user token is presented on another organisation’s domain, and without an API token', async () => {
      const valid = (await issue(member.id)).body.token as string;
      expect((await me(valid, beta)).status).toBe(401);
      const noApiToken = await t.request('GET', '/api/v2/integration/me', { host: acme.domain, headers: { authorization: `Bearer ${valid}` } });
      expect(noApiToken.status).toBe(401);
    });

    it('describes the integration API as OpenAPI, without credentials', async () => {
      const response = await t.request('GET', '/api/v2/integration/openapi.json', { host: acme.domain });
      expect(response.status).toBe(200);
      expect(response.body.openapi).toBe('3.1.0');
      expect(Object.keys(response.body.paths)).toContain('/me');
      expect(response.body.paths['/me'].get.parameters.map((p: { name: string }) => p.name)).toContain('Authorization');
      expect(response.body.security).toEqual([{ apiToken: [], userToken: [] }]);
      expect(response.body.components.securitySchemes.userToken).toMatchObject({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT' });
      const admin = await t.request('GET', '/api/v2/admin/openapi.json', { host: acme.domain });
      for (const path of [
        '/communities',
        '/communities/{communityId}',
        '/variable-configs',
        '/users',
        '/users/{userId}',
        '/users/{userId}/variables',
        '/users/{userId}/tokens',
        '/teams',
      ]) {
        expect(Object.keys(admin.body.paths), path).toContain(path);
      }
      expect(Object.keys(admin.body.components.schemas)).toEqual(
        expect.arrayContaining(['TeamMember', 'Community', 'LocalisedDetailsBlock', 'VariableConfig', 'CreateUser']),
      );
    });
  });

  it('without an API token → 401 on every user route', async () => {
    for (const [method, path] of [
      ['POST', '/api/v2/admin/users'],
      ['GET', '/api/v2/admin/users'],
      ['GET', `/api/v2/admin/users/${'a'.repeat(24)}`],
      ['PATCH', `/api/v2/admin/users/${'a'.repeat(24)}`],
      ['PUT', `/api/v2/admin/users/${'a'.repeat(24)}/variables`],
      ['GET', '/api/v2/admin/teams'],
    ]) {
      const response = await t.request(method!, path!, { host: acme.domain, body: {} });
      expect(response.status, `${method} ${path}`).toBe(401);
      expect(response.body.code).toBe('UNAUTHORIZED');
    }
  });
});
