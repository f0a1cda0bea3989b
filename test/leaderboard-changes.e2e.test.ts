import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, asTenant, type Tenant } from './support/service.ts';

const valid = {
  name: 'Weekly XP',
  description: 'Most XP this week',
  metricType: 'total-xp',
  startsAt: '2026-01-05T00:00:00Z',
  expiresAt: '2026-03-30T00:00:00Z',
  status: 'draft',
  period: 'weekly',
  conditions: [{ type: 'community', communityId: 'aaaaaaaaaaaaaaaaaaaaaaaa' }],
};

const TRANSITIONS: Record<string, string[]> = {
  draft: ['scheduled', 'live', 'archived'],
  scheduled: ['draft', 'live', 'archived'],
  live: ['expired', 'archived'],
  expired: ['archived'],
  archived: [],
};
const STATUSES = Object.keys(TRANSITIONS);

describe('changing a leaderboard over HTTP (PATCH /leaderboards/{id})', () => {
  let t: TestService;
  let acme: { organisationId: string; domain: string; token: string; tokenId: string };
  let beta: Tenant;
  const asAcme = (extra: Record<string, string> = {}) => asTenant(acme, extra);
  const path = (id: string) => `/api/v2/admin/leaderboards/${id}`;

  async function createLeaderboard(body: Record<string, unknown> = {}) {
    const response = await t.request('POST', '/api/v2/admin/leaderboards', { ...asAcme(), body: { ...valid, ...body } });
    expect(response.status).toBe(200);
    return response.body as Record<string, any>;
  }
  const eventTypes = async (id: string) => (await t.service.store.readStream(`leaderboard-${id}`)).map((event) => event.type);
  // Per stream: other slices' process managers append to other streams in the background.
  const streamLength = async (id: string) => (await t.service.store.readStream(`leaderboard-${id}`)).length;

  beforeAll(async () => {
    // No timed work: these leaderboards start and expire in the past, and the jobs would move their status under the test.
    t = await startTestService({ jobs: false });
    acme = await t.createOrganisation('acme');
    beta = await t.createOrganisation('beta');
  });
  afterAll(async () => {
    await t.close();
  });

  it('edits a draft and moves it to scheduled: 200 with the whole config, two events, readable back', async () => {
    const before = await createLeaderboard();
    const editor = await t.issueToken({ organisationId: acme.organisationId, name: 'editor', families: ['admin'] });
    const changes = {
      status: 'scheduled',
      name: 'Monthly XP',
      description: null,
      expiresAt: '2026-04-01T02:00:00+02:00',
      conditions: [{ type: 'variable-config', variableConfigId: 'b'.repeat(24), value: true }],
    };
    const response = await t.request('PATCH', path(before.id), { host: acme.domain, headers: { 'x-api-token': editor.token }, body: changes });
    expect(response.status).toBe(200);
    const config = response.body;
    expect(Object.keys(config).sort()).toEqual(Object.keys(before).sort());
    expect(config.id).toBe(before.id);
    expect(config.organisationId).toBe(acme.organisationId);
    expect(config.name).toBe('Monthly XP');
    expect(config.description).toBeNull();
    expect(config.metricType).toBe('total-xp');
    expect(config.period).toBe('weekly');
    expect(config.startsAt).toBe('2026-01-05T00:00:00.000Z');
    expect(config.expiresAt).toBe('2026-04-01T00:00:00.000Z');
    expect(config.status).toBe('scheduled');
    expect(config.conditions).toEqual(changes.conditions);
    expect(config.rewardsConfig).toEqual([]);
    expect(config.createdAt).toBe(before.createdAt);
    expect(config.createdBy).toBe(before.createdBy);
    expect(Date.parse(config.updatedAt)).toBeGreaterThanOrEqual(Date.parse(before.createdAt));
    expect(config.updatedBy).toBe(editor.tokenId);
    expect(config.updatedBy).not.toBe(config.createdBy);
    expect(response.headers['x-event-position']).toMatch(/^[0-9a-f]{32}$/);

    const stored = await t.service.store.readStream(`leaderboard-${before.id}`);
    expect(stored.map((event) => event.type)).toEqual(['LeaderboardCreated', 'LeaderboardUpdated', 'LeaderboardStatusChanged']);
    expect(stored[1]!.data).toEqual({
      leaderboardId: before.id,
      organisationId: acme.organisationId,
      changes: { name: 'Monthly XP', description: null, expiresAt: '2026-04-01T00:00:00.000Z', conditions: changes.conditions },
      updatedBy: editor.tokenId,
      updatedAt: config.updatedAt,
    });
    expect(stored[2]!.data).toEqual({
      leaderboardId: before.id,
      organisationId: acme.organisationId,
      from: 'draft',
      to: 'scheduled',
      changedBy: editor.tokenId,
      changedAt: config.updatedAt,
    });

    const minPosition = { 'x-min-position': response.headers['x-event-position'] as string };
    const read = await t.request('GET', path(before.id), asAcme(minPosition));
    expect(read.status).toBe(200);
    expect(read.body).toEqual(config);
    const list = await t.request('GET', '/api/v2/admin/leaderboards?limit=100', asAcme(minPosition));
    expect(list.body.edges.find((edge: { id: string }) => edge.id === before.id)).toEqual(config);
  });

  it('walks every legal transition, one PATCH each, each read back', async () => {
    for (const [from, targets] of Object.entries(TRANSITIONS)) {
      for (const to of targets) {
        const created = await createLeaderboard({ status: from });
        const response = await t.request('PATCH', path(created.id), { ...asAcme(), body: { status: to } });
        expect(response.status, `${from} → ${to}`).toBe(200);
        expect(response.body).toEqual({ ...created, status: to, updatedAt: response.body.updatedAt });
        expect(await eventTypes(created.id)).toEqual(['LeaderboardCreated', 'LeaderboardStatusChanged']);
        const read = await t.request('GET', path(created.id), asAcme({ 'x-min-position': response.headers['x-event-position'] as string }));
        expect(read.body.status, `${from} → ${to}`).toBe(to);
      }
    }
  });

  it('every illegal transition → 409 naming both states, nothing appended', async () => {
    for (const from of STATUSES) {
      const created = await createLeaderboard({ status: from });
      for (const to of STATUSES.filter((status) => status !== from && !TRANSITIONS[from]!.includes(status))) {
        const response = await t.request('PATCH', path(created.id), { ...asAcme(), body: { status: to } });
        expect(response.status, `${from} → ${to}`).toBe(409);
        expect(response.body).toEqual({ code: 'CONFLICT', message: `A leaderboard cannot go from ${from} to ${to}` });
        expect(await streamLength(created.id)).toBe(1);
      }
    }
  });

  it('the same status again → 200 with the config unchanged, no event and no position', async () => {
    const created = await createLeaderboard({ status: 'live' });
    const response = await t.request('PATCH', path(created.id), { ...asAcme(), body: { status: 'live', name: valid.name } });
    expect(response.status).toBe(200);
    expect(response.body).toEqual(created);
    expect(response.headers['x-event-position']).toBeUndefined();
    expect(await streamLength(created.id)).toBe(1);
  });

  it('changing the definition of a live, expired or archived leaderboard → 409, nothing appended', async () => {
    for (const status of ['live', 'expired', 'archived']) {
      const created = await createLeaderboard({ status });
      const response = await t.request('PATCH', path(created.id), { ...asAcme(), body: { name: 'Renamed', conditions: [] } });
      expect(response.status, status).toBe(409);
      expect(response.body).toEqual({
        code: 'CONFLICT',
        message: `name, conditions can only be changed while the leaderboard is draft or scheduled; it is ${status}`,
      });
      expect(await streamLength(created.id)).toBe(1);
    }
  });

  it('a scheduled leaderboard can be edited without a status change', async () => {
    const created = await createLeaderboard({ status: 'scheduled' });
    const response = await t.request('PATCH', path(created.id), { ...asAcme(), body: { expiresAt: null } });
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ status: 'scheduled', expiresAt: null });
    expect(await eventTypes(created.id)).toEqual(['LeaderboardCreated', 'LeaderboardUpdated']);
  });

  const invalid: [string, unknown, string][] = [
    ['an empty body', {}, ''],
    ['a body that is not an object', ['live'], ''],
    ['status unknown', { status: 'paused' }, 'status'],
    ['status null', { status: null }, 'status'],
    ['name empty', { name: '' }, 'name'],
    ['name not a string', { name: 7 }, 'name'],
    ['description not a string', { description: 5 }, 'description'],
    ['expiresAt not a date', { expiresAt: '31/12/2026' }, 'expiresAt'],
    ['conditions not an array', { conditions: { type: 'community' } }, 'conditions'],
    ['condition of unknown type', { conditions: [{ type: 'country', value: 'NL' }] }, 'conditions.0.type'],
    ['communityId not 24 hex', { conditions: [{ type: 'community', communityId: 'xyz' }] }, 'conditions.0.communityId'],
    ['more than 50 conditions', { conditions: Array(51).fill(valid.conditions[0]) }, 'conditions'],
    ['startsAt, which cannot change', { startsAt: '2026-02-01T00:00:00Z' }, ''],
    ['metricType, which cannot change', { status: 'live', metricType: 'total-xp' }, ''],
  ];

  it.each(invalid)('%s → 400 with issues, and no event appended', async (_case, body, issuePath) => {
    const created = await createLeaderboard();
    const response = await t.request('PATCH', path(created.id), { ...asAcme(), body });
    expect(response.status).toBe(400);
    expect(response.body.code).toBe('BAD_REQUEST');
    expect(response.body.message).toBe('Invalid input data');
    expect(response.body.issues.length).toBeGreaterThan(0);
    expect(response.body.issues.map((issue: { path: unknown[] }) => issue.path.join('.'))).toContain(issuePath);
    expect(await streamLength(created.id)).toBe(1);
  });

  it('an expiry at or before the leaderboard’s start → 400 with an issue, nothing appended', async () => {
    const created = await createLeaderboard();
    const response = await t.request('PATCH', path(created.id), { ...asAcme(), body: { expiresAt: '2026-01-05T00:00:00Z' } });
    expect(response.status).toBe(400);
    expect(response.body.code).toBe('BAD_REQUEST');
    expect(response.body.issues).toEqual([{ message: 'expiresAt: must be after startsAt (2026-01-05T00:00:00.000Z)' }]);
    expect(await streamLength(created.id)).toBe(1);
  });

  it('an unknown id, a malformed id or another organisation’s leaderboard → 404, nothing appended', async () => {
    const created = await createLeaderboard();
    for (const id of ['f'.repeat(24), 'not-an-id']) {
      const response = await t.request('PATCH', path(id), { ...asAcme(), body: { status: 'live' } });
      expect(response.status, id).toBe(404);
      expect(response.body.code).toBe('NOT_FOUND');
    }
    const foreign = await t.request('PATCH', path(created.id), { host: beta.domain, headers: { 'x-api-token': beta.token }, body: { status: 'live' } });
    expect(foreign.status).toBe(404);
    expect(foreign.body).toMatchObject({ code: 'NOT_FOUND' });
    expect(await streamLength('f'.repeat(24))).toBe(0);
    expect(await streamLength(created.id)).toBe(1);
  });

  it('without a token → 401, nothing appended', async () => {
    const created = await createLeaderboard();
    const response = await t.request('PATCH', path(created.id), { host: acme.domain, body: { status: 'live' } });
    expect(response.status).toBe(401);
    expect(response.body.code).toBe('UNAUTHORIZED');
    expect(await streamLength(created.id)).toBe(1);
  });

  it('Idempotency-Key: a retried PATCH answers the first response and appends nothing', async () => {
    const created = await createLeaderboard();
    const headers = asAcme({ 'idempotency-key': `go-live-${created.id}` });
    const first = await t.request('PATCH', path(created.id), { ...headers, body: { status: 'live' } });
    expect(first.status).toBe(200);
    const again = await t.request('PATCH', path(created.id), { ...headers, body: { status: 'live' } });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(await streamLength(created.id)).toBe(2);
  });
});
