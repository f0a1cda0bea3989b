import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorBodySchema } from '../api/api-description.ts';
import {
  encodeBody,
  operationsOf,
  toJsonText,
  requestArbitrary,
  SchemaArbitraries,
  type GeneratedRequest,
  type Operation,
  type World,
} from './support/openapi-fuzz.ts';
import { adminOf, block } from './support/programme.ts';
import { asTenant, PLATFORM_DOMAIN, startTestService, type Tenant, type TestService } from './support/service.ts';
import type { HttpResponse } from './support/http.ts';

/**
 * Property-based fuzzing of every operation of the three OpenAPI documents the service serves (issue 12),
 * with requests generated from the documents themselves (test/support/openapi-fuzz.ts): valid-shaped and
 * broken bodies, query strings, path ids and headers, NUL and unpaired surrogates, huge strings, deep
 * nesting, numbers out of range, wrong content types and encodings, bad credentials. Requests run one at a
 * time against the composed app on real PostgreSQL (and Redis with TEST_REDIS_URL). For each answer:
 *
 * - never a 5xx, and the status is one the operation documents (or one every request may get: 400, 401,
 *   403, 404, 413, 415, 429);
 * - an error is the contract's body `{message, code, issues?}` with the code of its status;
 * - a refused request (4xx) appends no event;
 * - nothing of the other organisation shows through: no answer names one of its ids the request did not,
 *   no request naming one in its path succeeds, and its streams gain no event.
 *
 * Deterministic: FUZZ_SEED (printed) and FUZZ_RUNS (runs per operation) explore further; FUZZ_OPERATION
 * (a substring of "METHOD /family/path") narrows the run to matching operations.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20_261_124);
const RUNS = Number(process.env.FUZZ_RUNS ?? 20);
const ONLY = process.env.FUZZ_OPERATION;
const GENERIC_STATUSES = new Set([400, 401, 403, 404, 413, 415, 429]);
const CODES: Record<number, string> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHORIZED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  409: 'CONFLICT',
  410: 'GONE',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  429: 'TOO_MANY_REQUESTS',
};
const FAMILIES = ['admin', 'integration', 'analytics'] as const;
const DAY = 86_400_000;

/** The resources of one organisation that requests can name, and its credentials. */
async function populate(t: TestService, tenant: Tenant, slug: string) {
  const admin = adminOf(t, tenant);
  const soon = (days: number) => new Date(Date.now() + days * DAY).toISOString();
  const community = await admin.community(`${slug} club`);
  const user = await admin.user(`${slug}-member`, [community]);
  const variableConfig = (await admin.post('/variable-configs', { key: 'tier', type: 'string' })).id as string;
  const leaderboard = (await admin.post('/leaderboards', { name: 'Weekly XP', metricType: 'total-xp', startsAt: soon(-1), status: 'live', period: 'weekly' }))
    .id as string;
  const assetReward = (
    await admin.post('/rewards', {
      kind: 'asset',
      communityId: community,
      details: { en: block('Free coffee') },
      redeemable: { redeemByDate: soon(300) },
      expiresAt: null,
    })
  ).id as string;
  const allocation = (await admin.post(`/rewards/${assetReward}/allocations`, { supply: 1000, amountToDistribute: 1 })).id as string;
  const giveaway = (await admin.post('/rewards', { kind: 'entries', communityId: community, details: { en: block('Trip') }, drawsAt: soon(200), supply: 1 }))
    .id as string;
  const challenge = await admin.post('/challenges', {
    communityId: community,
    details: { en: block('Coffee week') },
    actions: [
      {
        key: 'visit',
        category: 'participation',
        xp: 10,
        details: { en: block('Visit') },
        distribution: {
          pointsToDistribute: 5,
          rewardsConfig: { amountToDistribute: 1, allocations: [{ id: allocation, rewardId: assetReward, supply: 1000, amountToDistribute: 1 }] },
        },
      },
    ],
    startsAt: soon(-1),
    expiresAt: soon(300),
  });
  const game = (await admin.post('/games', { name: 'Wheel', type: 'spin-the-wheel', details: { en: block('Wheel') } })).id as string;
  const link = (await admin.post('/events/custom/link', { eventName: 'visit', communityId: community, expiryTime: 3600 })).url as string;
  await admin.post('/events/custom', { eventName: 'visit', userId: user.id, communityId: community, payload: { total: 3 } });
  await t.settle();
  const assets = await t.request('GET', '/api/v2/integration/me/reward-assets', asTenant(tenant, { authorization: `Bearer ${user.token}` }));
  expect(assets.status).toBe(200);
  const assetIds = (assets.body.edges as { id: string }[]).map((asset) => asset.id);
  expect(assetIds.length).toBeGreaterThan(0);
  return {
    ids: {
      communities: [community],
      users: [user.id],
      variableConfigs: [variableConfig],
      leaderboards: [leaderboard],
      rewards: [assetReward, giveaway],
      allocations: [allocation],
      challenges: [challenge.id as string],
      actions: [challenge.actions[0].id as string],
      games: [game],
      assets: assetIds,
    },
    externalUserId: user.externalUserId,
    userToken: user.token,
    linkToken: link.slice(link.indexOf('/l/') + 3),
  };
}

type Population = Awaited<ReturnType<typeof populate>>;

/** Which ids a parameter or field of this name takes. */
function idsByName(ids: Population['ids'], name: string): string[] | undefined {
  const byName: Record<string, string[]> = {
    communityId: ids.communities,
    additionalCommunityId: ids.communities,
    userId: ids.users,
    variableConfigId: ids.variableConfigs,
    leaderboardConfigId: ids.leaderboards,
    leaderboardId: ids.leaderboards,
    rewardId: ids.rewards,
    allocationId: ids.allocations,
    id: ids.allocations,
    challengeId: ids.challenges,
    actionId: ids.actions,
    gameConfigId: ids.games,
    assetId: ids.assets,
  };
  return byName[name];
}

describe('fuzzing every operation of the OpenAPI documents', () => {
  let t: TestService;
  let fuzz: Tenant;
  let other: Tenant;
  let own: Population;
  let theirs: Population;
  let world: World;
  let tokens: { wrongFamily: Record<string, string>; revoked: string };
  const documents: Record<string, any> = {};
  /** Events of the other organisation's streams at the start. */
  let theirEvents = 0;
  let dirty = true;
  /** The other organisation's ids the fuzzing organisation's accepted writes stored as its own words. */
  const ownWords = new Set<string>();
  /** Statuses seen per operation: printed at the end, to show the runs got past validation too. */
  const seen = new Map<string, Map<number, number>>();

  const countTheirEvents = async () =>
    Number(
      (
        await sql<{ count: string }>`
          select count(*)::text as count from es_events where stream_name in (
            select distinct stream_name from es_events where metadata->>'organisationId' = ${other.organisationId})`.execute(t.service.database.db)
      ).rows[0]!.count,
    );

  beforeAll(async () => {
    t = await startTestService({ jobs: false });
    fuzz = await t.createOrganisation('fuzz');
    other = await t.createOrganisation('fuzz-other');
    own = await populate(t, fuzz, 'fuzz');
    theirs = await populate(t, other, 'other');
    const revoked = await t.issueToken({ organisationId: fuzz.organisationId, name: 'revoked', families: ['admin', 'integration', 'analytics'] });
    await t.revokeToken(revoked.tokenId);
    const onlyAdmin = await t.issueToken({ organisationId: fuzz.organisationId, name: 'admin only', families: ['admin'] });
    const onlyAnalytics = await t.issueToken({ organisationId: fuzz.organisationId, name: 'analytics only', families: ['analytics'] });
    tokens = { wrongFamily: { admin: onlyAnalytics.token, integration: onlyAdmin.token, analytics: onlyAdmin.token }, revoked: revoked.token };
    const write = await t.request('POST', '/api/v2/admin/communities', { ...asTenant(fuzz), body: { name: 'Positions' } });
    const ownIds = Object.values(own.ids).flat();
    world = {
      idsFor: (name) => idsByName(own.ids, name),
      ownIds,
      otherIds: Object.values(theirs.ids).flat(),
      stringsFor: (name) =>
        ({
          userId: [own.externalUserId],
          externalUserId: [own.externalUserId, theirs.externalUserId],
          token: [own.linkToken, theirs.linkToken],
          eventName: ['visit'],
          key: ['visit', 'tier'],
          hostname: [fuzz.domain, other.domain, `shop.${PLATFORM_DOMAIN}`, 'rewards.example.com'],
          timezone: ['Europe/Paris', 'UTC', 'Mars/Olympus'],
          defaultLanguage: ['en', 'fr-CA'],
          name: ['visit'],
        })[name],
      positions: [write.headers['x-event-position'] as string],
    };
    for (const family of FAMILIES) {
      const response = await t.request('GET', `/api/v2/${family}/openapi.json`);
      expect(response.status).toBe(200);
      documents[family] = response.body;
    }
    await t.settle();
    theirEvents = await countTheirEvents();
    console.log(`fuzz: seed ${SEED}, ${RUNS} runs per operation (set FUZZ_SEED, FUZZ_RUNS, FUZZ_OPERATION to explore)`);
  });
  afterAll(async () => {
    const lines = [...seen].map(
      ([operation, tally]) =>
        `${operation.padEnd(58)} ${[...tally]
          .sort(([a], [b]) => a - b)
          .map(([status, count]) => `${status}×${count}`)
          .join(' ')}`,
    );
    console.log(`fuzz: statuses per operation (seed ${SEED})\n${lines.join('\n')}`);
    await t?.close();
  });

  const credentials = (operation: Operation, request: GeneratedRequest): Record<string, string> => {
    const headers: Record<string, string> = {};
    const apiToken = {
      valid: fuzz.token,
      bearer: `Bearer ${fuzz.token}`,
      missing: undefined,
      garbage: 'eng_00000000_not-a-token',
      'other-organisation': other.token,
      'wrong-family': tokens.wrongFamily[operation.family],
      revoked: tokens.revoked,
      huge: `eng_${'x'.repeat(8000)}`,
    }[request.credential];
    if (apiToken !== undefined) headers['x-api-token'] = apiToken;
    if (operation.headers.includes('authorization')) {
      const user = {
        valid: `Bearer ${own.userToken}`,
        missing: undefined,
        garbage: 'Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl',
        'other-organisation': `Bearer ${theirs.userToken}`,
        'not-bearer': `Basic ${own.userToken}`,
      }[request.userCredential];
      if (user !== undefined) headers.authorization = user;
    }
    return headers;
  };

  const hostOf = (request: GeneratedRequest) =>
    ({
      own: fuzz.domain,
      'own-uppercase': fuzz.domain.toUpperCase(),
      'own-with-port': `${fuzz.domain}:3000`,
      'other-organisation': other.domain,
      unknown: `nobody.${PLATFORM_DOMAIN}`,
    })[request.host];

  /** Sends one generated request and checks its answer; throws (with the request) on a broken promise. */
  async function exercise(operation: Operation, request: GeneratedRequest): Promise<void> {
    if (dirty) {
      // What process managers append in reaction to earlier accepted writes must not count against this request.
      await t.settle();
      dirty = false;
    }
    const path = `/api/v2/${operation.family}${operation.path.replace(/\{(\w+)\}/g, (_, name: string) => request.pathParameters[name]!)}${request.query ? `?${request.query}` : ''}`;
    const { payload, headers: contentHeaders } = encodeBody(request);
    const before = await t.eventCount();
    const response = await t.request(operation.method, path, {
      host: hostOf(request),
      headers: { ...contentHeaders, ...request.headers, ...credentials(operation, request) },
      ...(payload !== undefined ? { rawBody: payload } : {}),
    });
    const appended = (await t.eventCount()) - before;
    const tally = seen.get(`${operation.method} /${operation.family}${operation.path}`) ?? new Map<number, number>();
    tally.set(response.status, (tally.get(response.status) ?? 0) + 1);
    seen.set(`${operation.method} /${operation.family}${operation.path}`, tally);
    const problems = judge(operation, request, response, appended, `${path} ${request.body ? toJsonText(request.body.value) : ''}`);
    if (response.status < 300 && operation.method !== 'GET') dirty = true;
    if (problems.length > 0) {
      throw new Error(
        [
          `${operation.method} ${path.slice(0, 300)} → ${response.status} ${response.text.slice(0, 400)}`,
          ...problems,
          `body sent (${request.framing.kind === 'raw' ? 'raw' : JSON.stringify(request.framing)}): ${describeBody(request)}`,
          `headers sent: ${JSON.stringify({ ...contentHeaders, ...request.headers, credential: request.credential, user: request.userCredential, host: request.host }).slice(0, 600)}`,
        ].join('\n  '),
      );
    }
  }

  function judge(operation: Operation, request: GeneratedRequest, response: HttpResponse, appended: number, requestText: string): string[] {
    const problems: string[] = [];
    const { status } = response;
    if (status >= 500) problems.push(`a ${status}`);
    else if (!operation.statuses.has(status) && !GENERIC_STATUSES.has(status)) problems.push(`status ${status} is not documented for this operation`);
    if (status >= 400) {
      const parsed = errorBodySchema.strict().safeParse(response.body);
      if (!parsed.success) problems.push(`the error body is not {message, code, issues?}: ${parsed.error.message.slice(0, 300)}`);
      else if (CODES[status] && parsed.data.code !== CODES[status]) problems.push(`code ${parsed.data.code} for status ${status}`);
      if (appended !== 0) problems.push(`a refused request appended ${appended} event(s)`);
    }
    const leaked = world.otherIds.filter((id) => response.text.includes(id) && !requestText.includes(id) && !ownWords.has(id));
    // An accepted write may store such an id as a word of the fuzzing organisation's own (a new allocation id
    // that happens to spell one of theirs): later answers may show it back.
    if (status < 300 && operation.method !== 'GET') for (const id of world.otherIds) if (requestText.includes(id)) ownWords.add(id);
    if (leaked.length > 0) problems.push(`the answer names the other organisation's ${leaked.join(', ')}`);
    // Reads may filter by any id (and find nothing); anything else naming another organisation's resource must fail.
    const foreign = foreignReferences(operation, request);
    if (status < 300 && foreign.length > 0) problems.push(`a request naming the other organisation's ${foreign.join(', ')} succeeded`);
    return problems;
  }

  /**
   * The other organisation's ids this request names as references: path ids, and body fields whose name says
   * what they refer to (an allocation's `id` is a reference only when it is one of their allocations: a new id
   * may be anything). Organisation ids (templates shared with other organisations) are not resources.
   */
  function foreignReferences(operation: Operation, request: GeneratedRequest): string[] {
    const theirsByName = (name: string, value: string) => (idsByName(theirs.ids, name) ?? world.otherIds).includes(value);
    const found = Object.entries(request.pathParameters)
      .filter(([name, value]) => theirsByName(name, value))
      .map(([, value]) => value);
    if (operation.method === 'GET' || !request.body) return found;
    const pending: { value: unknown; name: string }[] = [{ value: request.body.value, name: '' }];
    while (pending.length > 0) {
      const { value, name } = pending.pop()!;
      if (typeof value === 'string' && world.otherIds.includes(value) && name !== 'availableAsTemplateForOrganisations' && theirsByName(name, value))
        found.push(value);
      else if (Array.isArray(value)) pending.push(...value.map((item) => ({ value: item, name: name.replace(/Ids$/, 'Id') })));
      else if (value !== null && typeof value === 'object') pending.push(...Object.entries(value).map(([key, item]) => ({ value: item, name: key })));
    }
    return found;
  }

  it('every operation with a path id documents 404', () => {
    const missing = FAMILIES.flatMap((family) => operationsOf(family, documents[family]))
      .filter((operation) => operation.pathParameters.length > 0 && !operation.statuses.has(404))
      .map((operation) => `${operation.method} /${operation.family}${operation.path}`);
    expect(missing).toEqual([]);
  });

  it.each(FAMILIES)('%s: every answer is documented, never a 5xx, errors in the contract, refusals append nothing', async (family) => {
    const schemas = new SchemaArbitraries(documents[family].components.schemas, world);
    const operations = operationsOf(family, documents[family]).filter((operation) => !ONLY || `${operation.method} /${family}${operation.path}`.includes(ONLY));
    const failures: string[] = [];
    for (const operation of operations) {
      const seed = SEED ^ hash(`${operation.method} ${family}${operation.path}`);
      const details = await fc.check(
        fc.asyncProperty(requestArbitrary(operation, schemas, world), (request) => exercise(operation, request)),
        // No shrinking: the service keeps what earlier runs wrote, so a shrunk request would not replay alike.
        { seed, numRuns: RUNS, endOnFailure: true },
      );
      if (details.failed) {
        const error = details.errorInstance as Error;
        // A judged answer carries its story in the message; anything else (a broken harness) needs its stack.
        const story = error?.message?.includes(' → ') ? error.message : String(error?.stack ?? error);
        failures.push(`[seed ${seed}, path ${details.counterexamplePath}] ${story}`);
      }
    }
    expect(failures, failures.join('\n\n')).toEqual([]);
    expect(await countTheirEvents(), "the other organisation's streams gained events").toBe(theirEvents);
    await t.settle();
    const parked = await sql<{ name: string; event_type: string; error: string }>`select name, event_type, error from projection_parked`.execute(
      t.service.database.db,
    );
    expect(parked.rows, 'events the projections could not apply').toEqual([]);
  });
});

/** The body as JSON text (before any encoding), cut short. */
function describeBody(request: GeneratedRequest): string {
  if (request.framing.kind === 'raw') return JSON.stringify(request.framing.raw.toString('latin1', 0, 200));
  return request.body ? toJsonText(request.body.value).slice(0, 1500) : '(none)';
}

/** A stable 31-bit hash, so each operation keeps its own sequence whatever other operations exist. */
function hash(text: string): number {
  let value = 0;
  for (const char of text) value = (Math.imul(value, 31) + char.codePointAt(0)!) | 0;
  return value & 0x7fffffff;
}
