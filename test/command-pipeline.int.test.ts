import { AsyncLocalStorage } from 'node:async_hooks';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aggregateStream, parsedFingerprintOf, handleCommand, idempotencyStream, type CommandPart } from '../command-api/command-handling.ts';
import type { Caller } from '../api/context.ts';
import { appendDecided } from '../command-api/jobs.ts';
import { logCustomEvent, logCustomEventBatch } from '../command-api/log-custom-event.ts';
import { communityChecks } from '../command-api/reference-checks.ts';
import { StreamStates, streamStatesOf } from '../command-api/stream-states.ts';
import { communityDecider } from '../domain/community.ts';
import { userDecider } from '../domain/user.ts';
import { newId } from '../infra/ids.ts';
import { logCustomEventBody } from '../api/contract/custom-events.ts';
import { startTestService, type TestService, type Tenant } from './support/service.ts';

/** The SQL statements sent by the work run inside `counted` (other work of the process is not counted). */
const counting = new AsyncLocalStorage<string[]>();
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string } | undefined)?.text;
  counting.getStore()?.push(String(text).replace(/\s+/g, ' ').trim());
  return (query as (...a: unknown[]) => unknown).apply(this, args);
} as typeof pg.Client.prototype.query;

async function counted<T>(work: () => Promise<T>): Promise<{ result: T; statements: string[] }> {
  const statements: string[] = [];
  const result = await counting.run(statements, work);
  return { result, statements };
}

const streamReads = (statements: string[]) => statements.filter((text) => /from es_events where stream_name/.test(text));

describe('the command pipeline on PostgreSQL: cached stream states, one path for routes and jobs', () => {
  let t: TestService;
  let acme: Tenant;
  let community: string;
  let alice: string;
  let caller: Caller;
  const as = (tenant: Tenant) => ({ host: tenant.domain, headers: { 'x-api-token': tenant.token } });
  const body = (extra: Record<string, unknown> = {}) => logCustomEventBody.parse({ eventName: 'purchase', userId: alice, communityId: community, ...extra });
  const callerNow = (): Caller => ({ ...caller, metadata: { ...caller.metadata, occurredAt: new Date().toISOString() } });

  beforeAll(async () => {
    t = await startTestService();
    acme = await t.createOrganisation('acme');
    community = (await t.request('POST', '/api/v2/admin/communities', { ...as(acme), body: { name: 'Runners' } })).body.id;
    alice = (await t.request('POST', '/api/v2/admin/users', { ...as(acme), body: { externalUserId: 'crm-alice' } })).body.id;
    caller = { organisationId: acme.organisationId, tokenId: 'test-token', metadata: { organisationId: acme.organisationId, actor: 'test-token' } };
  });
  afterAll(async () => {
    await t.close();
  });

  it('logs a custom event for a known user without reading a stream once its streams are cached', async () => {
    await logCustomEvent(t.service, callerNow(), body());
    const byPlatformId = await counted(() => logCustomEvent(t.service, callerNow(), body()));
    expect(byPlatformId.result.response.status).toBe(200);
    expect(streamReads(byPlatformId.statements)).toEqual([]);
    const byExternalId = await counted(() => logCustomEvent(t.service, callerNow(), body({ userId: 'crm-alice', nonce: newId() })));
    expect(byExternalId.result.response.status).toBe(200);
    expect(streamReads(byExternalId.statements)).toEqual([]);
    // A custom event's own stream is written once and not kept: the cache does not grow with every event.
    const states = streamStatesOf(t.service.store);
    expect(states.has(`customevent-${(byPlatformId.result.response.body as { id: string }).id}`)).toBe(false);
    expect(states.has(`user-${alice}`) && states.has(`community-${community}`)).toBe(true);
    console.info(
      `statements per custom event, known user, cached: by platform id ${byPlatformId.statements.length}, by external id with a nonce ${byExternalId.statements.length}\n` +
        [...byPlatformId.statements, '--', ...byExternalId.statements].join('\n'),
    );
  });

  it('creating something reads none of the streams its new ids name', async () => {
    // The service's own store, observed: every stream it reads while the routes below create things (its
    // background work included: nothing here gives it a reason to read those streams yet).
    const store = t.service.store;
    const read: string[] = [];
    const readStream = store.readStream.bind(store);
    store.readStream = (stream, ...rest) => {
      read.push(stream);
      return readStream(stream, ...rest);
    };
    try {
      const post = async (path: string, body: unknown) => {
        const response = await t.request('POST', `/api/v2/admin${path}`, { ...as(acme), body });
        expect([200, 201], `${path}: ${JSON.stringify(response.body)}`).toContain(response.status);
        return response.body as { id: string; actions?: { id: string }[] };
      };
      const images = { primaryImageUrl: '', secondaryImageUrl: '' };
      const details = { en: { title: 'Coffee week', description: 'Visit', light: images, dark: images } };
      const created = [
        await post('/communities', { name: 'Walkers' }),
        // Its first window starts in the future: a window closed already would be closed by a job at once, whose read
        // of the new leaderboard (the job's own, as it must) raced the requests below on a slow machine.
        await post('/leaderboards', { name: 'Weekly XP', metricType: 'total-xp', startsAt: '2099-01-05T00:00:00Z', status: 'live', period: 'weekly' }),
        await post('/users', { externalUserId: `crm-${newId()}`, communityIds: [community] }),
        await post('/webhooks', { url: 'https://hooks.example.com/engage', eventTypes: ['achievement.earned'] }),
        await post('/challenges', {
          communityId: community,
          details,
          actions: [{ key: 'visit', category: 'participation', xp: 10, criteria: [], details }],
          startsAt: '2026-03-01T00:00:00Z',
          expiresAt: '2026-04-01T00:00:00Z',
        }),
      ];
      const newIds = created.flatMap((thing) => [thing.id, ...(thing.actions ?? []).map((action) => action.id)]);
      expect(newIds).toHaveLength(6);
      expect(read.filter((stream) => newIds.some((id) => stream.endsWith(id)))).toEqual([]);
    } finally {
      store.readStream = readStream;
    }
  });

  it('a nonce recorded before answers were kept as JSON text still answers its first result', async () => {
    // A record as written before: the body itself, which jsonb keeps with its keys reordered.
    const first = { id: newId(), name: 'purchase', userId: alice, externalUserId: 'crm-alice', payload: { b: 1, a: 2 }, createdAt: new Date().toISOString() };
    const nonce = `before-${newId()}`;
    const sent = body({ nonce });
    await t.service.store.append(
      idempotencyStream({ organisationId: acme.organisationId, scope: 'nonce', key: nonce }),
      [{ type: 'RequestCompleted', data: { scope: 'nonce', key: nonce, fingerprint: parsedFingerprintOf(sent), response: { status: 200, body: first } } }],
      { expectedRevision: 'no_stream' },
    );
    const replay = await logCustomEvent(t.service, callerNow(), sent);
    expect(replay.replayed).toBe(true);
    expect(replay.response).toEqual({ status: 200, body: first });
  });

  it('a batch of 100 known-user events reads no stream and appends in one transaction', async () => {
    const items = Array.from({ length: 100 }, (_, i) => ({ body: body({ nonce: `pipeline-${i}`, payload: { i } }) }));
    const { result, statements } = await counted(() => logCustomEventBatch(t.service, callerNow(), items));
    expect(result.results.every((item) => item.status === 200)).toBe(true);
    expect(streamReads(statements)).toEqual([]);
    console.info(`statements for a batch of 100 custom events, known user, cached: ${statements.length}`);
    const replay = await counted(() => logCustomEventBatch(t.service, callerNow(), items));
    expect(replay.result.results).toEqual(result.results);
  });

  it('a change made elsewhere after a state was cached is a conflict, decided again on caught-up state', async () => {
    const states = streamStatesOf(t.service.store);
    const userStream = `user-${alice}`;
    const before = await aggregateStream(t.service.store, userStream, userDecider);
    expect(before.exists && before.displayName).toBe(null);
    // Another process updates the user: this process's cache does not know.
    await t.service.store.append(userStream, [
      {
        type: 'UserUpdated',
        data: { userId: alice, organisationId: acme.organisationId, changes: { displayName: 'Elsewhere' }, updatedAt: new Date().toISOString() },
      },
    ]);
    const update = (displayName: string): CommandPart => ({
      stream: userStream,
      decider: userDecider,
      command: { type: 'UpdateUser', data: { userId: alice, organisationId: acme.organisationId, changes: { displayName }, now: new Date().toISOString() } },
    });
    const handled = await handleCommand(t.service.store, [update('Here')], { organisationId: acme.organisationId });
    expect(handled.results[0]!.nextExpectedRevision).toBe(2n);
    const stored = await t.service.store.readStream(userStream);
    expect(stored.map((event) => event.type)).toEqual(['UserCreated', 'UserUpdated', 'UserUpdated']);
    // The cache holds what the append left; a read of the stream agrees.
    const after = await aggregateStream(t.service.store, userStream, userDecider);
    expect(after.exists && after.displayName).toBe('Here');
    expect(states.size).toBeGreaterThan(0);
  });

  it('a refusal on a cached state is checked on the current one: a community created since passes', async () => {
    const communityId = newId();
    const check = communityChecks(acme.organisationId, [communityId]);
    await expect(handleCommand(t.service.store, check, {})).rejects.toThrow(/does not exist/);
    await t.service.store.append(`community-${communityId}`, [
      {
        type: 'CommunityCreated',
        data: {
          communityId,
          organisationId: acme.organisationId,
          name: 'Late',
          description: null,
          details: {},
          createdAt: new Date().toISOString(),
          createdBy: 'test',
        },
      },
    ]);
    await expect(handleCommand(t.service.store, check, {})).resolves.toMatchObject({ position: null });
    // Another organisation's community is refused however it is cached.
    await expect(handleCommand(t.service.store, communityChecks(newId(), [communityId]), {})).rejects.toThrow(/does not exist/);
    expect((await aggregateStream(t.service.store, `community-${communityId}`, communityDecider)).exists).toBe(true);
  });

  it('a job’s command goes through the same path: run again, it appends nothing new', async () => {
    const stream = `user-${alice}`;
    const command = {
      type: 'UpdateUser',
      data: { userId: alice, organisationId: acme.organisationId, changes: { bio: 'from a job' }, now: new Date().toISOString() },
    } as const;
    const before = (await t.service.store.readStream(stream)).length;
    await appendDecided(t.service, stream, userDecider, command, 'job-1', { organisationId: acme.organisationId });
    await appendDecided(t.service, stream, userDecider, command, 'job-1', { organisationId: acme.organisationId });
    const events = await t.service.store.readStream(stream);
    expect(events).toHaveLength(before + 1);
    expect(events.at(-1)!.metadata).toMatchObject({ actor: 'job:job-1', causationId: 'job-1' });
  });

  it('keeps at most its capacity of streams, dropping the least recently used', async () => {
    const states = new StreamStates(2);
    const counter = { initialState: 0, evolve: (state: number) => state + 1 };
    const { evolve } = counter;
    states.remember('a', evolve, 1, 0n);
    states.remember('b', evolve, 2, 0n);
    await states.load(t.service.store, 'a', counter); // 'a' used: 'b' is now the oldest
    states.remember('c', evolve, 3, 0n);
    expect(states.size).toBe(2);
    expect((await states.load(t.service.store, 'a', counter)).state).toBe(1);
    // 'b' was dropped: loading it reads the (empty) stream.
    expect(await states.load(t.service.store, 'b', counter)).toEqual({ state: 0, revision: 'no_stream', current: true });
  });

  it('when full, drops a tenth at once, sparing once each stream used since the last time, oldest first', async () => {
    const states = new StreamStates(20);
    const counter = { initialState: 0, evolve: (state: number) => state + 1 };
    for (let index = 0; index < 20; index++) states.remember(`s${index}`, counter.evolve, index, 0n);
    // Down to 18: the two oldest are in use, so they are spared, and the next three oldest go in their stead.
    for (const stream of ['s0', 's1']) await states.load(t.service.store, stream, counter);
    states.remember('s20', counter.evolve, 20, 0n);
    expect(states.size).toBe(18);
    expect(['s0', 's1', 's2', 's3', 's4', 's5', 's20'].map((stream) => states.has(stream))).toEqual([true, true, false, false, false, true, true]);
    // Spared once: unused since, they are the first to go at the next sweep.
    states.remember('s21', counter.evolve, 21, 0n);
    states.remember('s22', counter.evolve, 22, 0n);
    states.remember('s23', counter.evolve, 23, 0n);
    expect(states.size).toBe(18);
    expect(['s0', 's1', 's5', 's6', 's23'].map((stream) => states.has(stream))).toEqual([false, false, false, true, true]);
  });
});
