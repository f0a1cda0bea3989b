import { Migrator, sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACTION_CATEGORIES } from '../domain/challenge.ts';
import { LEADERBOARD_STATUSES, METRIC_TYPES, PERIODS } from '../domain/leaderboard.ts';
import { formatPosition, type RecordedEvent } from '../infra/event-store/port.ts';
import { achievementsProjection } from '../projectors/achievements.ts';
import { challengeStepAnalyticsProjection } from '../projectors/challenge-step-analytics.ts';
import { leaderboardStandingsProjection } from '../projectors/leaderboard-standings.ts';
import type { Consumer } from '../projectors/runtime/consumer.ts';
import { userLedgersProjection } from '../projectors/user-ledgers.ts';
import { usersProjection } from '../projectors/users.ts';
import { blankProfile, userDecider, type NewUserProfile } from '../domain/user.ts';
import { freshDatabase, type TestDatabase } from './support/databases.ts';

/** A seeded generator, so a failing log can be replayed. */
function generator(seed: number) {
  let state = seed;
  const random = () => {
    state = (state * 16807) % 2147483647;
    return (state - 1) / 2147483646;
  };
  const int = (n: number) => Math.floor(random() * n);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;
  return { random, int, pick };
}

const DAY = 86_400_000;
const BASE = Date.parse('2027-01-01T00:00:00Z');

/**
 * A random log of what the standings, achievements and ledgers read: organisations changing time zone,
 * leaderboards created, edited, published and archived, rank rewards, closed windows, user variables,
 * custom events and the engine's facts (a custom event's facts share their instant), interleaved so that a
 * batch sees a leaderboard, a zone or a user's variables change between two facts.
 */
function randomLog(seed: number, count: number): RecordedEvent[] {
  const { random, int, pick } = generator(seed);
  const users: Record<string, string[]> = { o1: ['u1', 'u2', 'u3'], o2: ['u4', 'u5', 'u6'] };
  const leaderboards = ['l1', 'l2', 'l3', 'l4', 'l5', 'l6', 'l7', 'l8'].map((id) => ({ id, organisationId: pick(['o1', 'o2']) }));
  const instant = () => new Date(BASE + int(60) * DAY + int(24) * 3_600_000 + pick([0, 0, 1, 500])).toISOString();
  const conditions = () => [
    ...(random() < 0.4 ? [{ type: 'community', communityId: pick(['c1', 'c2', 'c3']) }] : []),
    ...(random() < 0.4 ? [{ type: 'variable-config', variableConfigId: 'tier', value: pick(['gold', 'silver']) }] : []),
  ];
  const events: { type: string; data: unknown }[] = [
    { type: 'OrganisationCreated', data: { organisationId: 'o1', timezone: 'UTC' } },
    { type: 'OrganisationCreated', data: { organisationId: 'o2', timezone: 'UTC' } },
  ];
  while (events.length < count) {
    const organisationId = pick(['o1', 'o2']);
    const fact = { organisationId, userId: pick(users[organisationId]!), communityId: pick(['c1', 'c2', 'c3']), occurredAt: instant() };
    const leaderboard = pick(leaderboards);
    const ref = { leaderboardId: leaderboard.id, organisationId: leaderboard.organisationId };
    const challengeId = pick(['h1', 'h2', 'h3']);
    const r = random();
    if (r < 0.03) {
      events.push({
        type: 'OrganisationSettingsChanged',
        data: { organisationId, timezone: pick(['UTC', 'America/New_York', 'Asia/Tokyo', 'Pacific/Chatham']) },
      });
    } else if (r < 0.07) {
      const startsAt = new Date(BASE + int(30) * DAY + pick([0, 5 * 3_600_000])).toISOString();
      const expiresAt = random() < 0.5 ? null : new Date(Date.parse(startsAt) + (1 + int(40)) * DAY).toISOString();
      const definition = { name: `n${int(9)}`, metricType: pick(METRIC_TYPES), period: pick(PERIODS), startsAt, expiresAt };
      events.push({ type: 'LeaderboardCreated', data: { ...ref, ...definition, status: pick(LEADERBOARD_STATUSES), conditions: conditions() } });
    } else if (r < 0.1) {
      const changes = {
        ...(random() < 0.5 ? { name: `m${int(9)}` } : {}),
        ...(random() < 0.4 ? { expiresAt: random() < 0.3 ? null : instant() } : {}),
        ...(random() < 0.4 ? { conditions: conditions() } : {}),
      };
      events.push({ type: 'LeaderboardUpdated', data: { ...ref, changes } });
    } else if (r < 0.14) {
      events.push({ type: 'LeaderboardStatusChanged', data: { ...ref, to: pick(LEADERBOARD_STATUSES) } });
    } else if (r < 0.16) {
      const startRank = 1 + int(3);
      events.push({ type: 'LeaderboardRewardsAssigned', data: { ...ref, rewards: [{ startRank, endRank: startRank + int(3) }] } });
    } else if (r < 0.19) {
      const ranked = [...users[leaderboard.organisationId]!].sort(() => random() - 0.5).slice(0, int(4));
      const windowStart = new Date(BASE + int(5) * DAY).toISOString();
      const standings = ranked.map((userId, index) => ({ rank: index + 1, userId, score: 10 - index, reachedAt: instant() }));
      const windowEnd = new Date(Date.parse(windowStart) + DAY).toISOString();
      events.push({ type: 'LeaderboardWindowClosed', data: { ...ref, windowStart, windowEnd, closedAt: instant(), standings } });
    } else if (r < 0.22) {
      events.push({
        type: 'UserVariablesSet',
        data: { userId: fact.userId, organisationId, values: random() < 0.8 ? { tier: pick(['gold', 'silver']) } : {} },
      });
    } else if (r < 0.35) {
      events.push({ type: 'CustomEventLogged', data: fact });
    } else if (r < 0.45) {
      const source = { kind: random() < 0.2 ? 'leaderboard' : 'action' };
      events.push({ type: 'XpEarned', data: { ...fact, category: pick(ACTION_CATEGORIES), amount: int(20), source } });
    } else if (r < 0.52) {
      events.push({ type: 'PointsEarned', data: { ...fact, amount: int(50), source: { kind: 'action' } } });
    } else if (r < 0.6) {
      events.push({ type: 'ChallengeStarted', data: { ...fact, challengeId, run: 1 } });
    } else if (r < 0.68) {
      const current = 1 + int(8);
      events.push({ type: 'StreakExtended', data: { ...fact, day: fact.occurredAt.slice(0, 10), currentStreak: current, longestStreak: current + int(3) } });
    } else {
      // What one custom event causes: attempts, a completed action, its XP, maybe the challenge, maybe the streak.
      events.push({ type: 'CustomEventLogged', data: fact });
      const attempt = { ...fact, customEventId: `ce-${events.length}`, challengeId, actionKey: 'k', stepIndex: 0 };
      events.push({ type: 'ActionAttempted', data: { ...attempt, actionId: pick(['a1', 'a2']), criteriaMet: false, outcome: 'criteria-not-met' } });
      events.push({ type: 'ActionAttempted', data: { ...attempt, actionId: pick(['a1', 'a2']), criteriaMet: true, outcome: 'completed' } });
      events.push({ type: 'ActionCompleted', data: { ...fact, challengeId } });
      events.push({ type: 'XpEarned', data: { ...fact, category: pick(ACTION_CATEGORIES), amount: 1 + int(9), source: { kind: 'action' } } });
      if (random() < 0.5) events.push({ type: 'ChallengeCompleted', data: { ...fact, challengeId, run: 1 + int(2) } });
      if (random() < 0.5)
        events.push({ type: 'StreakExtended', data: { ...fact, day: fact.occurredAt.slice(0, 10), currentStreak: 1 + int(8), longestStreak: 9 } });
    }
  }
  return recorded(events, `event-${seed}`);
}

/** A log as the store would hand it over: in order, each event on a stream of its own, ids under `prefix`. */
function recorded(events: readonly { type: string; data: unknown }[], prefix: string): RecordedEvent[] {
  return events.map(({ type, data }, index) => ({
    id: `${prefix}-${index}`,
    type,
    stream: `stream-${index}`,
    revision: 0n,
    position: formatPosition(0n, BigInt(index + 1)),
    data,
    metadata: {},
    createdAt: new Date(BASE),
  }));
}

async function migrated(db: Kysely<any>, consumer: Consumer, schema: string): Promise<void> {
  await db.schema.createSchema(schema).execute();
  const scoped = Object.fromEntries(
    Object.entries(consumer.migrations).map(([name, migration]) => [name, { up: (migrating: Kysely<any>) => migration.up(migrating.withSchema(schema)) }]),
  );
  const { error } = await new Migrator({ db, provider: { getMigrations: async () => scoped }, migrationTableSchema: schema }).migrateToLatest();
  expect(error).toBeUndefined();
}

/** Every table of the schema as sorted JSON rows. */
async function rowsOf(db: Kysely<any>, schema: string): Promise<Record<string, string[]>> {
  const tables = await db
    .selectFrom('information_schema.tables')
    .select('table_name')
    .where('table_schema', '=', schema)
    .where('table_name', 'not in', ['kysely_migration', 'kysely_migration_lock'])
    .orderBy('table_name')
    .execute();
  const rows: Record<string, string[]> = {};
  for (const { table_name: table } of tables) {
    const result = await sql<Record<string, unknown>>`select * from ${sql.table(`${schema}.${table}`)}`.execute(db);
    rows[table] = result.rows.map((row) => JSON.stringify(row)).sort();
  }
  return rows;
}

const context = {
  staging: false,
  append: () => Promise.reject(new Error('a read model appends nothing')),
  schedule: () => Promise.reject(new Error('a read model schedules nothing')),
};

/** Applies the events the consumer handles in batches of the sizes `sizeOfNext` says, each in its transaction. */
async function applied(db: Kysely<any>, consumer: Consumer, schema: string, events: readonly RecordedEvent[], sizeOfNext: () => number) {
  await migrated(db, consumer, schema);
  const handled = events.filter((event) => consumer.canHandle.has(event.type));
  for (let start = 0; start < handled.length;) {
    const batch = handled.slice(start, start + sizeOfNext());
    await db.transaction().execute((trx) => consumer.apply(trx.withSchema(schema), batch, context));
    start += batch.length;
  }
  return rowsOf(db, schema);
}

/**
 * As a rebuild with staging applies them (`BuildStaging`): the first `merged` events merged as live batches
 * are, up to `staged` staged in ragged batches, folded in one transaction as `relogBuild` does, and the rest
 * merged again (a generation made durable that still catches up).
 */
async function appliedStaged(
  db: Kysely<any>,
  consumer: Consumer,
  schema: string,
  events: readonly RecordedEvent[],
  bounds: { merged: number; staged: number },
  sizeOfNext: () => number,
) {
  const staging = consumer.staging!;
  await migrated(db, consumer, schema);
  await staging.create(db.withSchema(schema));
  const handled = events.filter((event) => consumer.canHandle.has(event.type));
  const inBatches = async (from: number, to: number, staged: boolean) => {
    for (let start = from; start < to;) {
      const batch = handled.slice(start, Math.min(to, start + sizeOfNext()));
      await db.transaction().execute((trx) => consumer.apply(trx.withSchema(schema), batch, { ...context, staging: staged }));
      start += batch.length;
    }
  };
  const merged = Math.min(bounds.merged, handled.length);
  const staged = Math.min(bounds.staged, handled.length);
  await inBatches(0, merged, false);
  await inBatches(merged, staged, true);
  await db.transaction().execute(async (trx) => {
    await sql`set local work_mem = '64MB'`.execute(trx);
    await staging.fold(trx.withSchema(schema));
    for (const table of staging.tables) await trx.schema.withSchema(schema).dropTable(table).execute();
  });
  await inBatches(staged, handled.length, false);
  return rowsOf(db, schema);
}

/**
 * The set-based projections fold a batch in memory: a whole log in one batch, in ragged batches, and one
 * event at a time (what the runtime falls back to to find a poison event) must leave the same rows.
 */
describe('the set-based read models leave the same rows whatever the batches', () => {
  let test: TestDatabase;
  beforeAll(async () => {
    test = await freshDatabase();
  });
  afterAll(async () => {
    await test.drop();
  });

  for (const seed of [11, 29]) {
    it(`random log ${seed}`, async () => {
      const db = test.database.db;
      const events = randomLog(seed, 1200);
      const { int } = generator(seed);
      for (const projection of [leaderboardStandingsProjection, achievementsProjection, userLedgersProjection, challengeStepAnalyticsProjection]) {
        const schema = (how: string) => `batches_${seed}_${projection.name}_${how}`;
        const single = await applied(db, projection, schema('single'), events, () => 1);
        expect(
          Object.values(single).every((rows) => rows.length > 0),
          projection.name,
        ).toBe(true);
        expect(await applied(db, projection, schema('whole'), events, () => events.length), projection.name).toEqual(single);
        expect(await applied(db, projection, schema('ragged'), events, () => 1 + int(60)), projection.name).toEqual(single);
        if (projection.staging) {
          // Staged from the start and folded at the end, as a rebuild does.
          const all = { merged: 0, staged: events.length };
          expect(await appliedStaged(db, projection, schema('staged'), events, all, () => 1 + int(60)), projection.name).toEqual(single);
          // Rows merged before the staged ones (a replayed event) are taken into the fold; a catch-up merges after it.
          const bounds = { merged: 100 + int(100), staged: 400 + int(200) };
          expect(await appliedStaged(db, projection, schema('around'), events, bounds, () => 1 + int(60)), projection.name).toEqual(single);
        }
      }
    }, 240_000);
  }

  // The users read model reads only the users a batch changes: one it only creates is inserted where the table
  // has none. A creation applied twice (a replay) leaves the first.
  it('users: creations, updates and variables of users created in the same batch or before, and a creation applied twice', async () => {
    const profile = (displayName: string): NewUserProfile => ({ ...blankProfile('c1'), displayName });
    const { int, pick } = generator(7);
    const at = (index: number) => new Date(BASE + index * 1000).toISOString();
    const users = ['u1', 'u2', 'u3', 'u4', 'u5', 'u6', 'u7', 'u8'];
    const log: { type: string; data: unknown }[] = [];
    const created = new Set<string>();
    while (log.length < 300) {
      const userId = pick(users);
      const now = at(log.length);
      const command =
        !created.has(userId) || int(20) === 0
          ? // A second creation of a user stands for a replay: it must change nothing.
            { type: 'CreateUser' as const, data: { userId, organisationId: 'o1', externalUserId: `x-${userId}`, profile: profile(`${userId} ${now}`), now } }
          : int(2) === 0
            ? { type: 'UpdateUser' as const, data: { userId, organisationId: 'o1', changes: { displayName: `${userId} at ${now}` }, now } }
            : {
                type: 'SetUserVariables' as const,
                data: { userId, organisationId: 'o1', values: [{ variableConfigId: 'tier', value: pick(['gold', 'silver']) }], now },
              };
      const state =
        created.has(userId) && command.type !== 'CreateUser'
          ? { ...userDecider.initialState, exists: true, id: userId, organisationId: 'o1' }
          : userDecider.initialState;
      for (const event of userDecider.decide(command, state as typeof userDecider.initialState)) log.push(event);
      created.add(userId);
    }
    const events = recorded(log, 'user-event');
    const db = test.database.db;
    const single = await applied(db, usersProjection, 'users_single', events, () => 1);
    expect(single.users).toHaveLength(users.length);
    expect(await applied(db, usersProjection, 'users_whole', events, () => events.length)).toEqual(single);
    expect(await applied(db, usersProjection, 'users_ragged', events, () => 1 + int(40))).toEqual(single);
    // The first creation's name stands unless an update changed it.
    const firstCreated = (userId: string) => log.find((event) => event.type === 'UserCreated' && (event.data as { userId: string }).userId === userId)!;
    const rows = await sql<{ id: string; display_name: string }>`select id, display_name from users_whole.users`.execute(db);
    for (const row of rows.rows) {
      const updated = log.some((event) => event.type === 'UserUpdated' && (event.data as { userId: string }).userId === row.id);
      if (!updated) expect(row.display_name).toBe((firstCreated(row.id).data as { displayName: string }).displayName);
    }
  });
});
