import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgres, type Database } from '../infra/database.ts';
import { EventIdConflictError, WrongExpectedRevisionError, type NewEvent, type StreamAppend } from '../infra/event-store/port.ts';
import { APPENDER_LOCK, PostgresEventStore } from '../infra/event-store/postgres.ts';
import { appendUnits, arrayLiteral, type UnitOutcome } from '../infra/event-store/postgres-append.ts';
import { migrate } from '../service.ts';
import { freshDatabase } from './support/databases.ts';

const test = await freshDatabase();

/**
 * The PostgreSQL append in one statement (`es_append`) and its group commit: appends that arrive together
 * share a statement, and each still gets its own answer.
 */
describe('PostgreSQL append: one statement, group commit', () => {
  // One append statement at a time: everything fired in one tick after the first goes in one batch.
  let batched: PostgresEventStore;
  let other: Database;
  let otherStore: PostgresEventStore;

  beforeAll(async () => {
    await migrate(test.database.db);
    batched = new PostgresEventStore(test.database, { maxConcurrentAppends: 1 });
    other = await openPostgres(test.url, { max: 4 });
    otherStore = new PostgresEventStore(other, { maxConcurrentAppends: 2 });
  });
  afterAll(async () => {
    await batched.close();
    await otherStore.close();
    await other.close();
    await test.drop();
  });

  const category = () => `a${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  const events = (count: number, type = 'Happened'): NewEvent[] =>
    Array.from({ length: count }, (_, i) => ({ type, data: { n: i }, metadata: { organisationId: 'org' } }));

  it('answers each append of a batch on its own: results, conflicts and an all-or-nothing multi-stream refusal', async () => {
    const cat = category();
    await batched.append(`${cat}-existing`, events(2));
    const outcomes = await Promise.allSettled([
      batched.append(`${cat}-warm`, events(1)), // goes alone; the rest wait for it and go together
      batched.append(`${cat}-new`, events(3), { expectedRevision: 'no_stream' }),
      batched.append(`${cat}-existing`, events(1), { expectedRevision: 0n }), // stale: refused
      batched.append(`${cat}-existing`, events(1), { expectedRevision: 1n }),
      batched.append(`${cat}-existing`, events(1), { expectedRevision: 2n }), // sees the previous one of the batch
      batched.appendMultiple([
        { stream: `${cat}-created-then-undone`, events: events(1), expectedRevision: 'no_stream' },
        { stream: `${cat}-existing`, events: events(1), expectedRevision: 'any' },
        { stream: `${cat}-missing`, events: events(1), expectedRevision: 'stream_exists' }, // refused: all of it
      ]),
      batched.appendMultiple([
        { stream: `${cat}-m1`, events: events(2), expectedRevision: 'no_stream' },
        { stream: `${cat}-existing`, events: events(1), expectedRevision: 'stream_exists' },
      ]),
      batched.append(`${cat}-new`, events(1), { expectedRevision: 'no_stream' }), // the batch created it: refused
    ]);
    const [warm, created, stale, next, afterNext, undone, multi, late] = outcomes;
    expect(warm).toMatchObject({ status: 'fulfilled', value: { nextExpectedRevision: 0n } });
    expect(created).toMatchObject({ status: 'fulfilled', value: { stream: `${cat}-new`, nextExpectedRevision: 2n } });
    expect(stale.status).toBe('rejected');
    expect((stale as PromiseRejectedResult).reason).toBeInstanceOf(WrongExpectedRevisionError);
    expect((stale as PromiseRejectedResult).reason).toMatchObject({ stream: `${cat}-existing`, expected: 0n, actual: 1n });
    expect(next).toMatchObject({ status: 'fulfilled', value: { nextExpectedRevision: 2n } });
    expect(afterNext).toMatchObject({ status: 'fulfilled', value: { nextExpectedRevision: 3n } });
    expect((undone as PromiseRejectedResult).reason).toMatchObject({ stream: `${cat}-missing`, actual: 'no_stream' });
    expect(multi).toMatchObject({ status: 'fulfilled' });
    const [m1, existing] = (multi as PromiseFulfilledResult<{ nextExpectedRevision: bigint; position: string }[]>).value;
    expect(m1!.nextExpectedRevision).toBe(1n);
    expect(existing!.nextExpectedRevision).toBe(4n);
    expect(m1!.position < existing!.position).toBe(true);
    expect((late as PromiseRejectedResult).reason).toMatchObject({ stream: `${cat}-new`, expected: 'no_stream', actual: 2n });

    // Nothing of the refused multi-stream append is left: no events, and the stream it created is gone.
    expect(await batched.readStream(`${cat}-created-then-undone`)).toEqual([]);
    await expect(batched.append(`${cat}-created-then-undone`, events(1), { expectedRevision: 'no_stream' })).resolves.toMatchObject({
      nextExpectedRevision: 0n,
    });
    expect((await batched.readStream(`${cat}-existing`)).map((event) => event.revision)).toEqual([0n, 1n, 2n, 3n, 4n]);
    // Positions within one statement follow arrival order.
    const positions = outcomes
      .flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []))
      .flatMap((value) => (Array.isArray(value) ? value : [value]));
    expect(positions.map((result) => result.position)).toEqual([...positions.map((result) => result.position)].sort());
  });

  it('a batch that only creates streams answers as es_append would: revisions, positions, refusals and replays', async () => {
    const cat = category();
    await batched.append(`${cat}-taken`, events(2));
    const [, first, second, third] = await Promise.allSettled([
      batched.append(`${cat}-warm`, events(1)), // goes alone; the three new-stream units wait and go together
      batched.appendMultiple([
        { stream: `${cat}-a`, events: events(2), expectedRevision: 'no_stream' },
        { stream: `${cat}-b`, events: events(1), expectedRevision: 'no_stream' },
      ]),
      batched.append(`${cat}-c`, events(3), { expectedRevision: 'no_stream' }),
      batched.append(`${cat}-d`, events(1), { expectedRevision: 'no_stream' }),
    ]);
    const [a, b] = (first as PromiseFulfilledResult<{ stream: string; nextExpectedRevision: bigint; position: string }[]>).value;
    const c = (second as PromiseFulfilledResult<{ nextExpectedRevision: bigint; position: string }>).value;
    const d = (third as PromiseFulfilledResult<{ nextExpectedRevision: bigint; position: string }>).value;
    expect([a!.stream, a!.nextExpectedRevision, b!.stream, b!.nextExpectedRevision]).toEqual([`${cat}-a`, 1n, `${cat}-b`, 0n]);
    expect([c.nextExpectedRevision, d.nextExpectedRevision]).toEqual([2n, 0n]);
    // Each answer is its stream's last event, and the batch's events are in arrival order.
    const written = (await batched.readAll({ filter: { categories: [cat] }, limit: 100 })).events.filter((event) => event.stream !== `${cat}-taken`);
    expect(written.map((event) => `${event.stream}@${event.revision}`)).toEqual([
      `${cat}-warm@0`,
      `${cat}-a@0`,
      `${cat}-a@1`,
      `${cat}-b@0`,
      `${cat}-c@0`,
      `${cat}-c@1`,
      `${cat}-c@2`,
      `${cat}-d@0`,
    ]);
    expect([a!.position, b!.position, c.position, d.position]).toEqual([
      written[2]!.position,
      written[3]!.position,
      written[6]!.position,
      written[7]!.position,
    ]);

    // A stream that exists: the plain statement is rolled back and es_append answers each unit on its own.
    const [, refused, kept, allTaken] = await Promise.allSettled([
      batched.append(`${cat}-warm2`, events(1)),
      batched.appendMultiple([
        { stream: `${cat}-e`, events: events(1), expectedRevision: 'no_stream' },
        { stream: `${cat}-taken`, events: events(1), expectedRevision: 'no_stream' },
      ]),
      batched.append(`${cat}-f`, events(1), { expectedRevision: 'no_stream' }),
      batched.append(`${cat}-a`, events(1), { expectedRevision: 'no_stream' }),
    ]);
    expect((refused as PromiseRejectedResult).reason).toBeInstanceOf(WrongExpectedRevisionError);
    expect((refused as PromiseRejectedResult).reason).toMatchObject({ stream: `${cat}-taken`, expected: 'no_stream', actual: 1n });
    expect(kept).toMatchObject({ status: 'fulfilled', value: { stream: `${cat}-f`, nextExpectedRevision: 0n } });
    expect((allTaken as PromiseRejectedResult).reason).toMatchObject({ stream: `${cat}-a`, actual: 1n });
    expect(await batched.readStream(`${cat}-e`)).toEqual([]);
    expect((await batched.readStream(`${cat}-taken`)).map((event) => event.revision)).toEqual([0n, 1n]);

    // Every stream taken: the plain statement wrote nothing and answered nothing; es_append refuses each.
    const refusals = await Promise.allSettled([
      batched.append(`${cat}-warm3`, events(1)),
      batched.append(`${cat}-b`, events(1), { expectedRevision: 'no_stream' }),
      batched.append(`${cat}-d`, events(1), { expectedRevision: 'no_stream' }),
    ]);
    expect(refusals.slice(1).map((outcome) => (outcome as PromiseRejectedResult).reason?.actual)).toEqual([0n, 0n]);
    expect((await batched.readStream(`${cat}-b`)).map((event) => event.revision)).toEqual([0n]);

    // Known ids (a job appending again): the unique key refuses the plain statement; es_append answers the replay.
    const ids = events(1).map((event) => ({ ...event, id: randomUUID() }));
    const original = await batched.append(`${cat}-g`, ids, { expectedRevision: 'no_stream' });
    const [, replayed, fresh] = await Promise.allSettled([
      batched.append(`${cat}-warm4`, events(1)),
      batched.append(`${cat}-g`, ids, { expectedRevision: 'no_stream' }),
      batched.append(`${cat}-h`, events(1), { expectedRevision: 'no_stream' }),
    ]);
    expect(replayed).toEqual({ status: 'fulfilled', value: original });
    expect(fresh).toMatchObject({ status: 'fulfilled', value: { nextExpectedRevision: 0n } });
    expect(await batched.readStream(`${cat}-g`)).toHaveLength(1);
  });

  it('a batch that only creates streams is one plain statement; es_append runs only when a stream or an id exists', async () => {
    const cat = category();
    await batched.append(`${cat}-taken`, events(1));
    const known = events(1).map((event) => ({ ...event, id: randomUUID() }));
    await batched.append(`${cat}-known`, known);
    const unit = (stream: string, batch = events(1)): StreamAppend[] => [
      { stream, events: batch.map((event) => ({ id: randomUUID(), ...event })), expectedRevision: 'no_stream' },
    ];
    // Which functions ran, counted by the server for this session (its statistics flushed before each count).
    const callsIn = (run: (db: Kysely<unknown>) => Promise<unknown>) =>
      test.database.db.connection().execute(async (db) => {
        await sql`set track_functions = 'pl'`.execute(db);
        const count = async () => {
          await sql`select pg_stat_force_next_flush()`.execute(db);
          const rows = await sql<{ name: string; calls: string }>`
            select funcname as name, calls from pg_stat_user_functions where funcname in ('es_append', 'es_new_streams')`.execute(db);
          return Object.fromEntries(rows.rows.map((row) => [row.name, Number(row.calls)]));
        };
        const before = await count();
        await run(db);
        const after = await count();
        return { esAppend: (after.es_append ?? 0) - (before.es_append ?? 0), checks: (after.es_new_streams ?? 0) - (before.es_new_streams ?? 0) };
      });
    const outcomes: UnitOutcome[][] = [];
    const append = (units: StreamAppend[][]) => (db: Kysely<unknown>) => appendUnits(db, units, APPENDER_LOCK).then((answered) => outcomes.push(answered));

    expect(await callsIn(append([unit(`${cat}-a`, events(2)), unit(`${cat}-b`)]))).toEqual({ esAppend: 0, checks: 2 });
    expect(await callsIn(append([unit(`${cat}-c`), unit(`${cat}-taken`)]))).toMatchObject({ esAppend: 1 });
    expect(await callsIn(append([unit(`${cat}-taken`), unit(`${cat}-a`)]))).toMatchObject({ esAppend: 1, checks: 0 });
    expect(await callsIn(append([[{ stream: `${cat}-known`, events: known, expectedRevision: 'no_stream' }], unit(`${cat}-d`)]))).toMatchObject({
      esAppend: 1,
    });
    const answers = outcomes.map((units) =>
      units.map((outcome) => ('results' in outcome ? outcome.results.map((result) => result.nextExpectedRevision) : outcome.error.name)),
    );
    expect(answers).toEqual([
      [[1n], [0n]],
      [[0n], 'WrongExpectedRevisionError'],
      ['WrongExpectedRevisionError', 'WrongExpectedRevisionError'],
      [[0n], [0n]],
    ]);
  });

  it('keeps every document as given, alone or in a batch: quotes, backslashes, unicode, nulls, numbers, order', async () => {
    const cat = category();
    const documents: NewEvent[] = [
      { type: 'Quoted', data: { text: 'say "hi"\\ \\"both\\" \\\\ and \n a line', nested: [{ '"key"': 'v\\' }] }, metadata: { note: '"m"\\' } },
      { type: 'Unicode', data: { text: 'héllo ✓ 🎉 \u0001 \u2028', empty: '' }, metadata: {} },
      { type: 'Nothing', data: null, metadata: { n: null } },
      { type: 'Numbers', data: { big: 12345678901234, small: -0.000125, list: [1, 2.5, -3] }, metadata: { organisationId: 'org' } },
      { type: 'Text', data: 'just a string', metadata: {} },
    ];
    const asGiven = documents.map((event) => ({ type: event.type, data: event.data, metadata: event.metadata }));
    // Alone: one stream's plain statement.
    await batched.append(`${cat}-alone`, documents);
    // In a batch: the group commit's `es_append` (the first goes alone, the rest together).
    await Promise.all([
      batched.append(`${cat}-first`, events(1)),
      batched.append(`${cat}-batched`, documents),
      batched.appendMultiple([
        { stream: `${cat}-multi-a`, events: documents.slice(0, 2) },
        { stream: `${cat}-multi-b`, events: documents.slice(2) },
      ]),
    ]);
    const read = async (stream: string) =>
      (await batched.readStream(stream)).map((event) => ({ type: event.type, data: event.data, metadata: event.metadata }));
    expect(await read(`${cat}-alone`)).toEqual(asGiven);
    expect(await read(`${cat}-batched`)).toEqual(asGiven);
    expect([...(await read(`${cat}-multi-a`)), ...(await read(`${cat}-multi-b`))]).toEqual(asGiven);
  });

  it('writes array parameters PostgreSQL reads back as given: any text, quotes, backslashes, braces, NULL and its word', async () => {
    const text = fc.string({ unit: 'grapheme', maxLength: 12 }).filter((value) => !value.includes('\u0000'));
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.option(fc.oneof(text, fc.constantFrom('NULL', 'null', '', ' ', '{}', '"', '\\', 'a,b', '{"x"}')), { nil: null })),
        async (values) => {
          const row = (await sql<{ values: (string | null)[] }>`select ${arrayLiteral(values)}::text[] as values`.execute(test.database.db)).rows[0]!;
          expect(row.values).toEqual(values);
        },
      ),
      { numRuns: 200 },
    );
    const numbers = [0, 1, -2, 2 ** 31 - 1];
    expect((await sql<{ values: number[] }>`select ${arrayLiteral(numbers)}::int[] as values`.execute(test.database.db)).rows[0]!.values).toEqual(numbers);
    // Streams and types with quotes and backslashes, in a batch's statement.
    const cat = category();
    const odd = [`${cat}-"quoted"`, `${cat}-back\\slash`, `${cat}-{braced},comma`];
    await Promise.all([batched.append(`${cat}-first`, events(1)), ...odd.map((stream) => batched.append(stream, events(2, 'Odd "type" \\')))]);
    // And alone: one stream's plain statement.
    odd.push(`${cat}-alone-"odd"\\`);
    await batched.append(odd.at(-1)!, events(2, 'Odd "type" \\'));
    for (const stream of odd)
      expect((await batched.readStream(stream)).map((event) => [event.stream, event.type])).toEqual([
        [stream, 'Odd "type" \\'],
        [stream, 'Odd "type" \\'],
      ]);
  });

  it('a unit whose data PostgreSQL refuses fails alone; the others of its batch land', async () => {
    const cat = category();
    const outcomes = await Promise.allSettled([
      batched.append(`${cat}-1`, events(1)),
      batched.append(`${cat}-2`, events(1)),
      batched.append(`${cat}-bad`, [{ type: 'Bad', data: { text: 'nul \u0000 inside' } }]),
      batched.append(`${cat}-3`, events(1)),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    const page = await batched.readAll({ filter: { categories: [cat] }, limit: 1000 });
    expect(page.events.map((event) => event.stream).sort()).toEqual([`${cat}-1`, `${cat}-2`, `${cat}-3`]);
  });

  it('idempotency: the same ids twice in one tick, a replay in a batch, and partly known ids', async () => {
    const cat = category();
    const known = events(2).map((event) => ({ ...event, id: randomUUID() }));
    const first = await batched.append(`${cat}-k`, known, { expectedRevision: 'no_stream' });
    const twice = events(1).map((event) => ({ ...event, id: randomUUID() }));
    const [, replay, same1, same2, partly] = await Promise.allSettled([
      batched.append(`${cat}-warm`, events(1)),
      batched.append(`${cat}-k`, known, { expectedRevision: 'no_stream' }),
      batched.append(`${cat}-t`, twice),
      batched.append(`${cat}-t`, twice),
      batched.append(`${cat}-k`, [known[0]!, { ...events(1)[0]!, id: randomUUID() }]),
    ]);
    expect(replay).toEqual({ status: 'fulfilled', value: first });
    expect(same1.status).toBe('fulfilled');
    expect(same2).toEqual(same1);
    expect((partly as PromiseRejectedResult).reason).toBeInstanceOf(EventIdConflictError);
    expect((partly as PromiseRejectedResult).reason.eventIds).toEqual([known[0]!.id]);
    expect(await batched.readStream(`${cat}-k`)).toHaveLength(2);
    expect(await batched.readStream(`${cat}-t`)).toHaveLength(1);
    // The same ids to another stream: a conflict, not a replay.
    await expect(batched.append(`${cat}-elsewhere`, known)).rejects.toBeInstanceOf(EventIdConflictError);
  });

  it('concurrent writers in two processes on hot streams: each revision once, every retried append lands', async () => {
    const cat = category();
    const streams = Array.from({ length: 3 }, (_, i) => `${cat}-${i}`);
    let conflicts = 0;
    const write = async (store: PostgresEventStore, n: number) => {
      const stream = streams[n % streams.length]!;
      const second = streams[(n + 1) % streams.length]!;
      for (;;) {
        const [last] = await store.readStream(stream, { direction: 'backwards', limit: 1 });
        const [lastOfSecond] = await store.readStream(second, { direction: 'backwards', limit: 1 });
        try {
          // Every third one is a two-stream append, so batches lock rows of several streams in both orders.
          if (n % 3 === 0) {
            return await store.appendMultiple([
              { stream, events: events(1, `W${n}`), expectedRevision: last ? last.revision : 'no_stream' },
              { stream: second, events: events(1, `W${n}`), expectedRevision: lastOfSecond ? lastOfSecond.revision : 'no_stream' },
            ]);
          }
          return await store.append(stream, events(1, `W${n}`), { expectedRevision: last ? last.revision : 'no_stream' });
        } catch (error) {
          expect(error).toBeInstanceOf(WrongExpectedRevisionError);
          conflicts++;
        }
      }
    };
    const writers = 40;
    await Promise.all(Array.from({ length: writers }, (_, n) => write(n % 2 === 0 ? batched : otherStore, n)));
    const written = await Promise.all(streams.map((stream) => batched.readStream(stream)));
    for (const stream of written) expect(stream.map((event) => event.revision)).toEqual(stream.map((_, i) => BigInt(i)));
    const types = written.flat().map((event) => event.type);
    // Each writer's events once: one per single append, two (in two streams) per multi-stream append.
    for (let n = 0; n < writers; n++) expect(types.filter((type) => type === `W${n}`)).toHaveLength(n % 3 === 0 ? 2 : 1);
    expect(conflicts).toBeGreaterThan(0);
  });

  it('an append waiting on a stream another transaction holds does not hold up the process’s other appends', async () => {
    const cat = category();
    await otherStore.append(`${cat}-held`, events(1));
    // The default store: one statement at a time, one more beside a statement that has stalled.
    const store = new PostgresEventStore(other);
    const holder = await other.db.startTransaction().execute();
    try {
      await holder.selectFrom('es_streams').select('revision').where('stream_name', '=', `${cat}-held`).forUpdate().execute();
      let heldLanded = false;
      const held = store.append(`${cat}-held`, events(1), { expectedRevision: 0n }).then((result) => {
        heldLanded = true;
        return result;
      });
      // Only once the held one has stalled may these run, beside it; they land while it still waits.
      const others = await Promise.all([store.append(`${cat}-free-1`, events(1)), store.append(`${cat}-free-2`, events(2))]);
      expect(others.map((result) => result.nextExpectedRevision)).toEqual([0n, 1n]);
      expect(heldLanded).toBe(false);
      await holder.commit().execute();
      expect((await held).nextExpectedRevision).toBe(1n);
    } finally {
      if (!holder.isCommitted) await holder.rollback().execute();
      await store.close();
    }
    expect((await batched.readStream(`${cat}-held`)).map((event) => event.revision)).toEqual([0n, 1n]);
  });

  type Op = { stream: number; count: number; expected: 'any' | 'no_stream' | 'stream_exists' | number };

  it('property: any interleaving of appends answers as one append at a time, in arrival order, would', async () => {
    const op = fc.record({
      stream: fc.integer({ min: 0, max: 2 }),
      count: fc.integer({ min: 1, max: 3 }),
      expected: fc.oneof(fc.constantFrom<'any' | 'no_stream' | 'stream_exists'>('any', 'no_stream', 'stream_exists'), fc.integer({ min: 0, max: 6 })),
    });
    await answersAsOneAtATime(op, 2);
  });

  it('property: batches of new streams (the plain statement, and es_append when one is taken) answer as one at a time would', async () => {
    // Mostly streams expected new, among few names: batches that only create streams, some of them taken already.
    const op = fc.record({
      stream: fc.integer({ min: 0, max: 5 }),
      count: fc.integer({ min: 1, max: 3 }),
      expected: fc.oneof({ arbitrary: fc.constant<'no_stream'>('no_stream'), weight: 6 }, { arbitrary: fc.integer({ min: 0, max: 4 }), weight: 1 }),
    });
    await answersAsOneAtATime(op, 5);
  });

  async function answersAsOneAtATime(op: fc.Arbitrary<Op>, lastStream: number): Promise<void> {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(op, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 12 }), async (units: Op[][]) => {
        const cat = category();
        // The model: one unit at a time, in arrival order (the batch preserves it).
        const revisions = new Map<number, number>();
        const expectedOutcomes = units.map((unit) => {
          const after = new Map(revisions);
          const answers: number[] = [];
          for (const append of unit) {
            const current = after.get(append.stream);
            const holds =
              append.expected === 'any' ||
              (append.expected === 'no_stream' && current === undefined) ||
              (append.expected === 'stream_exists' && current !== undefined) ||
              append.expected === current;
            if (!holds) return 'refused';
            after.set(append.stream, (current ?? -1) + append.count);
            answers.push(after.get(append.stream)!);
          }
          for (const [stream, revision] of after) revisions.set(stream, revision);
          return answers;
        });
        const outcomes = await Promise.allSettled(
          units.map((unit) =>
            batched.appendMultiple(
              unit.map((append) => ({
                stream: `${cat}-${append.stream}`,
                events: events(append.count),
                expectedRevision: typeof append.expected === 'number' ? BigInt(append.expected) : append.expected,
              })),
            ),
          ),
        );
        const answered = outcomes.map((outcome) =>
          outcome.status === 'rejected' ? 'refused' : outcome.value.map((result) => Number(result.nextExpectedRevision)),
        );
        expect(answered).toEqual(expectedOutcomes);
        for (const reason of outcomes.flatMap((outcome) => (outcome.status === 'rejected' ? [outcome.reason] : []))) {
          expect(reason).toBeInstanceOf(WrongExpectedRevisionError);
        }
        for (let stream = 0; stream <= lastStream; stream++) {
          const stored = await batched.readStream(`${cat}-${stream}`);
          expect(stored.map((event) => Number(event.revision))).toEqual(Array.from({ length: (revisions.get(stream) ?? -1) + 1 }, (_, at) => at));
        }
      }),
      { numRuns: 40 },
    );
  }
});

/**
 * PL/pgSQL keeps a session's plans: `es_append`'s lookups planned on a new, near-empty store must still use
 * the indexes once the tables have grown (a kept sequential scan made each batch read the whole tables).
 */
describe('PostgreSQL append: lookups by index however the store grew', () => {
  // One connection: the appends and the statistics read below share a session, and so its kept plans.
  let small: Awaited<ReturnType<typeof freshDatabase>>;
  let store: PostgresEventStore;

  beforeAll(async () => {
    small = await freshDatabase({ max: 1 });
    await migrate(small.database.db);
    store = new PostgresEventStore(small.database, { maxConcurrentAppends: 1 });
  });
  afterAll(async () => {
    await store.close();
    await small.drop();
  });

  const sequentialScans = async (): Promise<Record<string, number>> => {
    // This session's counts reach the shared statistics when it goes idle after asking for a flush.
    await sql`select pg_stat_force_next_flush()`.execute(small.database.db);
    await sql`select pg_stat_clear_snapshot()`.execute(small.database.db);
    const { rows } = await sql<{ relname: string; seq_scan: string }>`
      select relname, seq_scan from pg_stat_user_tables where relname in ('es_streams', 'es_events')`.execute(small.database.db);
    return Object.fromEntries(rows.map((row) => [row.relname, Number(row.seq_scan)]));
  };
  // Two streams in one append: the function's path (a single stream alone takes a plain statement).
  const appendPair = () =>
    store.appendMultiple([
      { stream: `pair-${randomUUID()}`, events: [{ type: 'Happened', data: {}, metadata: {} }], expectedRevision: 'no_stream' },
      { stream: `pair-${randomUUID()}`, events: [{ type: 'Happened', data: {}, metadata: {} }], expectedRevision: 'no_stream' },
    ]);

  it('scans neither es_streams nor es_events after the session planned its appends on an empty store', async () => {
    // More than five calls: from then on the session keeps a generic plan, made for the tables as they are now.
    for (let call = 0; call < 8; call++) await appendPair();
    await sql`insert into es_streams (stream_name, revision) select 'grown-' || n, 0 from generate_series(1, 20000) as n`.execute(small.database.db);
    await sql`insert into es_events (stream_name, stream_revision, event_id, event_type, data, metadata)
      select 'grown-' || n, 0, gen_random_uuid(), 'Happened', '{}', '{}' from generate_series(1, 20000) as n`.execute(small.database.db);
    const before = await sequentialScans();
    for (let call = 0; call < 5; call++) await appendPair();
    const after = await sequentialScans();
    expect(after).toEqual(before);
    expect(await store.readStream('grown-1')).toHaveLength(1);
  });
});
