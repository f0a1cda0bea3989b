import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asTenant, startTestService, type Tenant, type TestService } from './support/service.ts';
import type { HttpResponse } from './support/http.ts';

/**
 * Hostile input at the edge (issue 12, defects 1 and 2): text the service does not accept (NUL, unpaired
 * surrogates, undecodable paths), bodies in a wrong encoding, dates out of range, typos in distribution
 * bodies and unbounded strings. Each is the contract's 400 (415 for an unknown encoding) and changes nothing.
 */
const images = { primaryImageUrl: '', secondaryImageUrl: '' };
const block = (title: string) => ({ title, description: title, light: images, dark: images });
const rewardId = 'd'.repeat(24);
const leaderboard = { name: 'Weekly XP', metricType: 'total-xp', startsAt: '2026-01-05T00:00:00Z', status: 'draft', period: 'weekly' };
const distribution = {
  pointsToDistribute: 5,
  bonusXpToDistribute: 2,
  rewardsConfig: { amountToDistribute: 1, allocations: [{ id: 'a'.repeat(24), rewardId, supply: 10, amountToDistribute: 1 }] },
};
const NUL = '\u0000';
const LONE_SURROGATE = '\ud800';

describe('input refused at the edge', () => {
  let t: TestService;
  let acme: Tenant;
  let communityId: string;
  let leaderboardId: string;
  let challenge: { id: string; actions: { id: string; distribution: unknown }[] };
  let gameId: string;
  const asAcme = (extra: Record<string, string> = {}) => asTenant(acme, extra);

  /** The request is the contract's 400 (or `status`) and appends nothing, even once everything has settled. */
  async function refused(method: string, path: string, options: { body?: unknown; rawBody?: string; headers?: Record<string, string> } = {}, status = 400) {
    await t.settle();
    const before = await t.eventCount();
    const response = await t.request(method, path, {
      host: acme.domain,
      body: options.body,
      rawBody: options.rawBody,
      headers: { ...asAcme().headers, ...options.headers },
    });
    expect(response.status, response.text.slice(0, 300)).toBe(status);
    expect(Object.keys(response.body).every((key) => ['message', 'code', 'issues'].includes(key))).toBe(true);
    if (status === 400) {
      expect(response.body.code).toBe('BAD_REQUEST');
      expect(response.body.message).toBe('Invalid input data');
      expect(response.body.issues.length).toBeGreaterThan(0);
      for (const issue of response.body.issues) expect(typeof issue.message).toBe('string');
    }
    await t.settle();
    expect(await t.eventCount()).toBe(before);
    return response;
  }
  const issuePaths = (response: HttpResponse) => response.body.issues.map((issue: { path?: unknown[] }) => (issue.path ?? []).join('.'));
  /** An unknown field is named by the object that holds it (path) and by its key (message). */
  function unknownField(response: HttpResponse, where: string) {
    const key = where.split('.').pop()!;
    const holder = where.split('.').slice(0, -1).join('.');
    expect(issuePaths(response)).toEqual([holder]);
    expect(response.body.issues[0].message).toContain(`"${key}"`);
  }

  beforeAll(async () => {
    // Room for a 1 MB name under the body limit, so that the schema (not the parser) refuses it.
    t = await startTestService({ jobs: false, env: { BODY_LIMIT: '2mb' } });
    acme = await t.createOrganisation('edge');
    const community = await t.request('POST', '/api/v2/admin/communities', { ...asAcme(), body: { name: 'Coffee' } });
    expect(community.status).toBe(201);
    communityId = community.body.id;
    const created = await t.request('POST', '/api/v2/admin/leaderboards', { ...asAcme(), body: leaderboard });
    expect(created.status).toBe(200);
    leaderboardId = created.body.id;
    const madeChallenge = await t.request('POST', '/api/v2/admin/challenges', {
      ...asAcme(),
      body: {
        communityId,
        details: { en: block('Coffee lover') },
        actions: [{ key: 'coffee-ordered', category: 'loyalty', details: { en: block('Order a coffee') }, distribution }],
        startsAt: '2099-01-05T00:00:00Z',
        expiresAt: '2099-03-30T00:00:00Z',
      },
    });
    expect(madeChallenge.status, JSON.stringify(madeChallenge.body)).toBe(201);
    challenge = madeChallenge.body;
    const game = await t.request('POST', '/api/v2/admin/games', {
      ...asAcme(),
      body: { name: 'Wheel', type: 'spin-the-wheel', details: { en: block('Wheel') } },
    });
    expect(game.status).toBe(201);
    gameId = game.body.id;
    await t.settle();
  });
  afterAll(async () => {
    await t.close();
  });

  describe('text: NUL and unpaired surrogates are a 400 naming where they were', () => {
    const bodies: [string, string, (bad: string) => unknown, string][] = [
      ['a leaderboard name', '/api/v2/admin/leaderboards', (bad) => ({ ...leaderboard, name: `Weekly${bad}` }), 'body.name'],
      ['a community name', '/api/v2/admin/communities', (bad) => ({ name: `Tea${bad}` }), 'body.name'],
      ['a user id', '/api/v2/admin/users', (bad) => ({ externalUserId: `ext${bad}` }), 'body.externalUserId'],
      [
        'a game detail title',
        '/api/v2/admin/games',
        (bad) => ({ name: 'G', type: 'wheel', details: { en: { ...block('T'), title: `T${bad}` } } }),
        'body.details.en.title',
      ],
      [
        'a reward metadata key',
        '/api/v2/admin/rewards',
        (bad) => ({
          kind: 'entries',
          communityId: 'c'.repeat(24),
          details: { en: block('R') },
          drawsAt: '2099-01-01T00:00:00Z',
          supply: 1,
          metadata: { [`k${bad}`]: 1 },
        }),
        'body.metadata',
      ],
      [
        'a custom event payload, deep down',
        '/api/v2/admin/events/custom',
        (bad) => ({ eventName: 'coffee-ordered', userId: 'someone', communityId: 'c'.repeat(24), payload: { order: { lines: [{ note: `hot${bad}` }] } } }),
        'body.payload.order.lines.0.note',
      ],
      [
        'a custom event payload key',
        '/api/v2/admin/events/custom',
        (bad) => ({ eventName: 'coffee-ordered', userId: 'someone', communityId: 'c'.repeat(24), payload: { order: { [`x${bad}`]: true } } }),
        'body.payload.order',
      ],
      [
        'a custom event link name',
        '/api/v2/admin/events/custom/link',
        (bad) => ({ eventName: `e${bad}`, communityId: 'c'.repeat(24), expiryTime: 60 }),
        'body.eventName',
      ],
    ];
    for (const [character, bad] of [
      ['NUL', NUL],
      ['an unpaired surrogate', LONE_SURROGATE],
    ] as const) {
      it.each(bodies)(`${character} in %s → 400`, async (_what, path, body, where) => {
        const response = await refused('POST', path, { body: body(bad) });
        expect(issuePaths(response)).toEqual([where]);
      });
    }

    it('the escaped forms (\\u0000, \\ud800) in the raw JSON are refused just the same', async () => {
      for (const escape of ['\\u0000', '\\ud800', '\\udc00x', '\\ud800\\ud800']) {
        const response = await refused('POST', '/api/v2/admin/communities', { rawBody: `{"name":"Tea${escape}"}` });
        expect(issuePaths(response)).toEqual(['body.name']);
      }
      // A well-formed pair (an emoji) and other control characters are text like any other.
      const fine = await t.request('POST', '/api/v2/admin/communities', { ...asAcme(), rawBody: '{"name":"Tea \\ud83c\\udf75\\u0001"}' });
      expect(fine.status).toBe(201);
      expect(fine.body.name).toBe('Tea 🍵\u0001');
    });

    it('the escaped forms are refused in a compressed body too, and a body in another charset than UTF-8 is a 415 whatever it holds', async () => {
      const escaped = '{"name":"Tea\\u0000"}';
      const cases = [
        [gzipSync(Buffer.from(escaped)), { 'content-encoding': 'gzip' }, 400],
        [Buffer.from(escaped, 'utf16le'), { 'content-type': 'application/json; charset=utf-16le' }, 415],
        [Buffer.from('{"name":"Tea for two"}', 'utf16le'), { 'content-type': 'application/json; charset=utf-16le' }, 415],
        [Buffer.from('{"name":"Tea for two"}', 'utf16le'), { 'content-type': 'application/json; charset=utf-16' }, 415],
      ] as const;
      for (const [payload, headers, status] of cases) {
        await t.settle();
        const before = await t.eventCount();
        const response = await rawPost('/api/v2/admin/communities', payload, headers);
        expect(response.status, response.text).toBe(status);
        if (status === 400) expect(issuePaths(response)).toEqual(['body.name']);
        else expect(response.body.code).toBe('UNSUPPORTED_MEDIA_TYPE');
        await t.settle();
        expect(await t.eventCount()).toBe(before);
      }
      const fine = await rawPost('/api/v2/admin/communities', Buffer.from('{"name":"Tea for two"}'), { 'content-type': 'application/json; charset=UTF-8' });
      expect(fine.status, fine.text).toBe(201);
    });

    it('a change with NUL in it leaves the leaderboard as it was', async () => {
      const before = await t.request('GET', `/api/v2/admin/leaderboards/${leaderboardId}`, asAcme());
      await refused('PATCH', `/api/v2/admin/leaderboards/${leaderboardId}`, { body: { name: `x${NUL}`, description: 'fine' } });
      const after = await t.request('GET', `/api/v2/admin/leaderboards/${leaderboardId}`, asAcme());
      expect(after.body).toEqual(before.body);
    });

    it.each([
      ['%00', `/api/v2/admin/leaderboards/%00`, 'GET'],
      ['a%00 on a write', `/api/v2/admin/communities/a%00`, 'PATCH'],
      ['%ZZ', '/api/v2/admin/leaderboards/%ZZ', 'GET'],
      ['%ff%fe', '/api/v2/admin/communities/%ff%fe', 'GET'],
      ['an encoded surrogate (%ED%A0%80)', '/api/v2/admin/users/%ED%A0%80', 'GET'],
      ['a bad escape on an unknown route', '/api/v2/admin/nowhere/%E0%A4%A', 'GET'],
    ])('a path with %s → 400', async (_what, path, method) => {
      const response = await refused(method, path, method === 'GET' ? {} : { body: { name: 'x' } });
      expect(issuePaths(response)).toEqual(['path']);
    });

    it.each([
      ['externalUserId', '/api/v2/admin/users?externalUserId=a%00b'],
      ['search', '/api/v2/admin/teams?search=%00'],
      ['role', '/api/v2/admin/teams?role=admin%00'],
      ['userId', '/api/v2/integration/events?userId=%00'],
      ['name', '/api/v2/integration/events?name=coffee%00'],
      ['limit', '/api/v2/admin/leaderboards?limit=1%00'],
    ])('NUL in the %s query filter → 400', async (name, path) => {
      const response = await refused('GET', path);
      expect(issuePaths(response)).toEqual([`query.${name}`]);
    });

    it('a body nested deeper than 32 levels is a 400 (free-form reward metadata 100 000 levels deep was a 500)', async () => {
      const reward = { kind: 'entries', communityId: 'c'.repeat(24), details: { en: block('R') }, drawsAt: '2099-01-01T00:00:00Z', supply: 1 };
      const deep = JSON.stringify({ ...reward, metadata: {} }).replace('"metadata":{}', `"metadata":${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`);
      expect(issuePaths(await refused('POST', '/api/v2/admin/rewards', { rawBody: deep }))).toEqual(['body']);
      expect(issuePaths(await refused('POST', '/api/v2/admin/rewards', { body: { ...reward, metadata: nested(32) } }))).toEqual(['body']);
      const depth = 50_000;
      const arrays = await refused('POST', '/api/v2/admin/communities', { rawBody: `{"name":"x","details":${'['.repeat(depth)}${']'.repeat(depth)}}` });
      expect(issuePaths(arrays)).toEqual(['body']);
      // 32 levels in all (the body, its metadata, 30 more) are accepted.
      const accepted = await t.request('POST', '/api/v2/admin/rewards', { ...asAcme(), body: { ...reward, metadata: nested(31) } });
      expect(accepted.status, accepted.text.slice(0, 300)).toBe(201);
    });
  });

  describe('Content-Encoding', () => {
    const plain = JSON.stringify({ name: 'Encoded' });

    it.each(['gzip', 'deflate', 'br'])('%s announced for a body that is not in it → 400', async (encoding) => {
      const response = await refused('POST', '/api/v2/admin/communities', { rawBody: plain, headers: { 'content-encoding': encoding } });
      expect(response.body.issues[0].message).toContain(encoding);
    });

    it('an encoding the service does not know → 415', async () => {
      const response = await refused('POST', '/api/v2/admin/communities', { rawBody: plain, headers: { 'content-encoding': 'compress' } }, 415);
      expect(response.body.code).toBe('UNSUPPORTED_MEDIA_TYPE');
    });

    it('a body of another media type → 415; JSON by another of its types (application/vnd.api+json) is read', async () => {
      for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'text/json']) {
        const response = await refused('POST', '/api/v2/admin/communities', { rawBody: plain, headers: { 'content-type': type } }, 415);
        expect(response.body.message).toContain('application/json');
      }
      const response = await rawPost('/api/v2/admin/communities', Buffer.from(plain), { 'content-type': 'application/vnd.api+json' });
      expect(response.status, response.text).toBe(201);
    });

    it.each([
      ['gzip', gzipSync],
      ['deflate', deflateSync],
      ['br', brotliCompressSync],
    ] as const)('a real %s body is read', async (encoding, compress) => {
      const response = await rawPost('/api/v2/admin/communities', compress(Buffer.from(plain)), { 'content-encoding': encoding });
      expect(response.status, response.text).toBe(201);
    });
  });

  describe('dates out of range are a 400', () => {
    it.each([
      ['the giveaways overview, to', '/api/v2/analytics/rewards/stats/giveaways/overview?to=9999-12-31', 'query.to'],
      ['the giveaways overview, from', '/api/v2/analytics/rewards/stats/giveaways/overview?from=0001-01-01', 'query.from'],
      ['the giveaways overview, a date-time', '/api/v2/analytics/rewards/stats/giveaways/overview?to=9999-12-31T23:59:59-12:00', 'query.to'],
      ['the action steps, to', `/api/v2/analytics/challenges/stats/action-steps?challengeId=${'e'.repeat(24)}&to=9999-12-31`, 'query.to'],
      ['the action steps, from', `/api/v2/analytics/challenges/stats/action-steps?challengeId=${'e'.repeat(24)}&from=0001-01-01`, 'query.from'],
      ['the event log, from', '/api/v2/integration/events?from=0001-01-01', 'query.from'],
      ['the event log, to', '/api/v2/integration/events?to=9999-12-31T23:59:59Z', 'query.to'],
      ['leaderboard standings, window', `/api/v2/integration/leaderboards/${'e'.repeat(24)}/standings?window=9999-12-31`, 'query.window'],
    ])('%s', async (_what, path, where) => {
      const response = await refused('GET', path);
      expect(issuePaths(response).map((p: string) => `query.${p}`)).toContain(where);
    });

    it('the bounds themselves are accepted', async () => {
      const overview = await t.request('GET', '/api/v2/analytics/rewards/stats/giveaways/overview?from=1900-01-01&to=2999-12-31', asAcme());
      expect(overview.status, JSON.stringify(overview.body)).toBe(200);
      const events = await t.request('GET', '/api/v2/integration/events?from=1900-01-01&to=2999-12-31T23:59:59.999Z', asAcme());
      expect(events.status, JSON.stringify(events.body)).toBe(200);
    });

    it('a leaderboard starting in year 9999 or expiring in year 1 is a 400', async () => {
      await refused('POST', '/api/v2/admin/leaderboards', { body: { ...leaderboard, startsAt: '9999-12-31' } });
      await refused('PATCH', `/api/v2/admin/leaderboards/${leaderboardId}`, { body: { expiresAt: '0001-01-01T00:00:00Z' } });
    });
  });

  describe('distribution bodies: unknown fields are a 400 and change nothing', () => {
    it('POST /actions/{id}/distribution with {"pointz": 5} → 400; the action keeps its points, XP and allocations', async () => {
      const actionId = challenge.actions[0]!.id;
      const response = await refused('POST', `/api/v2/admin/actions/${actionId}/distribution`, { body: { pointz: 5 } });
      unknownField(response, 'pointz');
      const read = await t.request('GET', `/api/v2/admin/challenges/${challenge.id}`, asAcme());
      expect(read.body.actions[0].distribution).toEqual(challenge.actions[0]!.distribution);
      expect(read.body.actions[0].distribution.pointsToDistribute).toBe(5);
    });

    it.each([
      ['in rewardsConfig', { ...distribution, rewardsConfig: { ...distribution.rewardsConfig, amount: 3 } }, 'rewardsConfig.amount'],
      [
        'in an allocation',
        { ...distribution, rewardsConfig: { amountToDistribute: 1, allocations: [{ rewardId, supply: 1, suply: 2 }] } },
        'rewardsConfig.allocations.0.suply',
      ],
    ])('an action distribution with an unknown field %s → 400', async (_where, body, path) => {
      const response = await refused('POST', `/api/v2/admin/actions/${challenge.actions[0]!.id}/distribution`, { body });
      unknownField(response, path);
    });

    it.each([
      ['at the top', { distributions: [distribution], replace: true }, 'replace'],
      ['in a prize', { distributions: [{ ...distribution, points: 1 }] }, 'distributions.0.points'],
      [
        'in an allocation',
        { distributions: [{ rewardsConfig: { allocations: [{ rewardId, supply: 1, reward: 'x' }] } }] },
        'distributions.0.rewardsConfig.allocations.0.reward',
      ],
    ])('a game distribution with an unknown field %s → 400', async (_where, body, path) => {
      const before = await t.request('GET', `/api/v2/admin/games/${gameId}`, asAcme());
      const response = await refused('POST', `/api/v2/admin/games/${gameId}/distribution`, { body });
      unknownField(response, path);
      expect((await t.request('GET', `/api/v2/admin/games/${gameId}`, asAcme())).body).toEqual(before.body);
    });

    it.each([
      ['at the top', { rewards: [], keep: true }, 'keep'],
      ['in a rank range', { rewards: [{ startRank: 1, endRank: 3, ...distribution, pointsToDistibute: 2 }] }, 'rewards.0.pointsToDistibute'],
      [
        'in an allocation',
        { rewards: [{ startRank: 1, endRank: 3, rewardsConfig: { allocations: [{ rewardId, supply: 1, isLive: true }] } }] },
        'rewards.0.rewardsConfig.allocations.0.isLive',
      ],
    ])('a leaderboard distribution with an unknown field %s → 400', async (_where, body, path) => {
      const before = await t.request('GET', `/api/v2/admin/leaderboards/${leaderboardId}/distribution`, asAcme());
      const response = await refused('POST', `/api/v2/admin/leaderboards/${leaderboardId}/distribution`, { body });
      unknownField(response, path);
      expect((await t.request('GET', `/api/v2/admin/leaderboards/${leaderboardId}/distribution`, asAcme())).body).toEqual(before.body);
    });

    it('points or XP past a billion a hand-out, or a price past a billion points → 400 (1e308 twice overflowed to Infinity)', async () => {
      const actionId = challenge.actions[0]!.id;
      const tooMuch = await refused('POST', `/api/v2/admin/actions/${actionId}/distribution`, {
        body: { ...distribution, pointsToDistribute: 1e308, bonusXpToDistribute: 1_000_000_001 },
      });
      expect(issuePaths(tooMuch).sort()).toEqual(['bonusXpToDistribute', 'pointsToDistribute']);
      await refused('PATCH', `/api/v2/admin/challenges/${challenge.id}`, { body: { rewardDistribution: { points: 1e308 } } });
      await refused('PATCH', `/api/v2/admin/challenges/${challenge.id}`, { body: { unlockPrice: 1e12 } });
      const read = await t.request('GET', `/api/v2/admin/challenges/${challenge.id}`, asAcme());
      expect(read.body.actions[0].distribution.pointsToDistribute).toBe(5);
      const atTheBound = await t.request('POST', `/api/v2/admin/actions/${actionId}/distribution`, {
        ...asAcme(),
        body: { ...distribution, pointsToDistribute: 1_000_000_000 },
      });
      expect(atTheBound.status, atTheBound.text).toBe(200);
      const back = await t.request('POST', `/api/v2/admin/actions/${actionId}/distribution`, { ...asAcme(), body: distribution });
      expect(back.status, back.text).toBe(200);
    });

    it("a challenge's rewardDistribution with a typo → 400", async () => {
      const response = await refused('PATCH', `/api/v2/admin/challenges/${challenge.id}`, { body: { rewardDistribution: { pointz: 5 } } });
      unknownField(response, 'rewardDistribution.pointz');
    });
  });

  describe('strings and arrays are bounded', () => {
    it('a 1 MB leaderboard name → 400; 200 characters are accepted, 201 are not', async () => {
      const huge = await refused('POST', '/api/v2/admin/leaderboards', { body: { ...leaderboard, name: 'x'.repeat(1_000_000) } });
      expect(issuePaths(huge)).toEqual(['name']);
      await refused('POST', '/api/v2/admin/leaderboards', { body: { ...leaderboard, name: 'x'.repeat(201) } });
      await refused('POST', '/api/v2/admin/leaderboards', { body: { ...leaderboard, name: '   ' } });
      await refused('POST', '/api/v2/admin/leaderboards', { body: { ...leaderboard, description: 'x'.repeat(2001) } });
      const longest = await t.request('POST', '/api/v2/admin/leaderboards', {
        ...asAcme(),
        body: { ...leaderboard, name: 'x'.repeat(200), description: 'y'.repeat(2000) },
      });
      expect(longest.status).toBe(200);
    });

    it('an x-correlation-id that is not a plain id of at most 128 characters is not stored in the events: the request id is', async () => {
      const correlationOf = async (correlation: string) => {
        const response = await t.request('POST', '/api/v2/admin/communities', { ...asAcme({ 'x-correlation-id': correlation }), body: { name: 'Traced' } });
        expect(response.status).toBe(201);
        const [event] = await t.service.store.readStream(`community-${response.body.id}`);
        return { stored: event!.metadata.correlationId, requestId: response.headers['x-request-id'] };
      };
      expect((await correlationOf('order-42.retry_1')).stored).toBe('order-42.retry_1');
      for (const insane of ['x'.repeat(129), 'two words', 'caf\u00e9']) {
        const { stored, requestId } = await correlationOf(insane);
        expect(stored).toBe(requestId);
      }
    });

    it('a date-time with a megabyte of fractional seconds → 400', async () => {
      await refused('POST', '/api/v2/admin/leaderboards', { body: { ...leaderboard, startsAt: `2026-01-05T00:00:00.${'1'.repeat(100_000)}Z` } });
    });

    it('every string, array and amount of every request body and query parameter has a documented maximum', async () => {
      const unbounded: string[] = [];
      for (const family of ['admin', 'integration', 'analytics']) {
        const document = (await t.request('GET', `/api/v2/${family}/openapi.json`, { host: acme.domain })).body;
        const components = document.components.schemas as Record<string, any>;
        for (const [path, operations] of Object.entries(document.paths as Record<string, Record<string, any>>)) {
          for (const [method, operation] of Object.entries(operations)) {
            const where = `${family} ${method.toUpperCase()} ${path}`;
            const body = operation.requestBody?.content['application/json'].schema;
            if (body) unbounded.push(...unboundedIn(body, components, `${where} body`));
            for (const parameter of operation.parameters.filter((p: { in: string }) => p.in === 'query')) {
              unbounded.push(...unboundedIn(parameter.schema, components, `${where} ?${parameter.name}`));
            }
          }
        }
      }
      expect(unbounded).toEqual([]);
    });
  });

  /** A POST with a binary body (the shared client sends text), through a listener of the test's own on the same app. */
  async function rawPost(path: string, payload: Buffer, headers: Record<string, string>): Promise<HttpResponse> {
    const listener = t.service.app.listen(0, '127.0.0.1');
    await new Promise((resolve) => listener.once('listening', resolve));
    try {
      return await new Promise((resolve, reject) => {
        const req = httpRequest(
          {
            host: '127.0.0.1',
            port: (listener.address() as AddressInfo).port,
            method: 'POST',
            path,
            headers: { host: acme.domain, 'x-api-token': acme.token, 'content-type': 'application/json', 'content-length': payload.length, ...headers },
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (chunk: Buffer) => chunks.push(chunk));
            res.on('end', () => {
              const text = Buffer.concat(chunks).toString('utf8');
              resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text ? JSON.parse(text) : undefined, text });
            });
          },
        );
        req.on('error', reject);
        req.end(payload);
      });
    } finally {
      await new Promise((resolve) => listener.close(resolve));
    }
  }
});

function nested(depth: number): unknown {
  let value: unknown = 'leaf';
  for (let level = 0; level < depth; level++) value = { level: value };
  return value;
}

/** Every string without maxLength (enum and const aside) and array without maxItems, with where it is. */
function unboundedIn(schema: any, components: Record<string, any>, where: string, seen = new Set<string>()): string[] {
  if (!schema || typeof schema !== 'object') return [];
  if (schema.$ref) {
    const id = String(schema.$ref).replace('#/components/schemas/', '');
    if (seen.has(id)) return [];
    return unboundedIn(components[id], components, `${where} (${id})`, new Set([...seen, id]));
  }
  const found: string[] = [];
  const types = ([] as string[]).concat(schema.type ?? []);
  if (types.includes('string') && schema.maxLength === undefined && schema.enum === undefined && schema.const === undefined) found.push(`${where}: string`);
  if (types.includes('array') && schema.maxItems === undefined) found.push(`${where}: array`);
  // A number is an amount the service adds up (points, XP, supplies: 1e308 twice overflowed), except a `value`
  // compared as given (a criterion's, a condition's, a variable's).
  const compared = /\.value(\.|$)/.test(where);
  if ((types.includes('number') || types.includes('integer')) && !compared && schema.maximum === undefined && schema.exclusiveMaximum === undefined)
    found.push(`${where}: number`);
  for (const key of ['anyOf', 'oneOf', 'allOf', 'prefixItems'] as const) {
    for (const [index, part] of ((schema[key] ?? []) as unknown[]).entries()) found.push(...unboundedIn(part, components, `${where}.${key}[${index}]`, seen));
  }
  for (const [name, property] of Object.entries((schema.properties ?? {}) as Record<string, unknown>))
    found.push(...unboundedIn(property, components, `${where}.${name}`, seen));
  if (schema.items) found.push(...unboundedIn(schema.items, components, `${where}[]`, seen));
  if (schema.propertyNames) found.push(...unboundedIn(schema.propertyNames, components, `${where}{key}`, seen));
  else if (types.includes('object') && schema.additionalProperties !== false && schema.additionalProperties !== undefined) found.push(`${where}: keys`);
  if (typeof schema.additionalProperties === 'object') found.push(...unboundedIn(schema.additionalProperties, components, `${where}{}`, seen));
  return found;
}
