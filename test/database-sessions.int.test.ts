import { sql, type Kysely } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { holdBackgroundWork, inBackground, openPostgres, SHORT_STATEMENT, startedWithoutBackgroundWork } from '../infra/database.ts';
import { knownErrorAnswer } from '../infra/http/errors.ts';
import { freshDatabase } from './support/databases.ts';

/**
 * The pool's sessions when the server ends them while they are checked out: the work that holds one fails
 * with the server's error, the process goes on, and the pool hands out working sessions afterwards.
 */
const test = await freshDatabase();
afterAll(() => test.drop());

/** Limits of each kind of work, set apart so a session shows which it has. */
const KIND_TIMEOUTS = { statementMs: 1500, idleInTransactionMs: 1200, backgroundStatementMs: 45_000, backgroundIdleInTransactionMs: 30_000 };
const request = { statement: '1500ms', idle: '1200ms' };
const background = { statement: '45s', idle: '30s' };

/** A pool of one session, handed to both kinds of work in turn. */
function oneSessionPool() {
  return openPostgres(test.url, { max: 1, timeouts: KIND_TIMEOUTS });
}

/** The statement and idle-in-transaction limits the session that runs this statement has. */
async function limits(db: Kysely<any>) {
  const { rows } = await sql<{
    statement: string;
    idle: string;
  }>`select current_setting('statement_timeout') as statement, current_setting('idle_in_transaction_session_timeout') as idle`.execute(db);
  return rows[0];
}

describe('a pool session the server ends while it is checked out', () => {
  it('fails the transaction that idled past its limit, without ending the process, and the pool goes on', async () => {
    const database = await openPostgres(test.url, { max: 2, timeouts: { idleInTransactionMs: 200 } });
    try {
      const outcome = await database.db
        .transaction()
        .execute(async (trx) => {
          await sql`select 1`.execute(trx);
          // Idle in the transaction long past its limit: the server ends the session between two statements.
          await new Promise((resolve) => setTimeout(resolve, 1500));
          await sql`select 2`.execute(trx);
          return 'committed';
        })
        .catch((error: unknown) => error);
      expect(outcome).toBeInstanceOf(Error);
      // Every session of the pool answers afterwards.
      const answers = await Promise.all([1, 2, 3, 4].map(async (n) => (await sql<{ n: number }>`select ${n}::int as n`.execute(database.db)).rows[0]!.n));
      expect(answers).toEqual([1, 2, 3, 4]);
    } finally {
      await database.close();
    }
  });
});

describe("a pool session's limits follow the kind of work that checks it out", () => {
  it('gives requests and background work their own statement and idle limits, whatever the work did before on the session', async () => {
    const database = await oneSessionPool();
    const switches: string[] = [];
    database.observeStatements((purpose) => {
      if (purpose === 'session-limits') switches.push(purpose);
    });
    try {
      expect(await limits(database.db)).toEqual(request);
      // A background transaction, then a background statement.
      expect(await inBackground(() => database.db.transaction().execute((trx) => limits(trx)))).toEqual(background);
      expect(await inBackground(() => limits(database.db))).toEqual(background);
      expect(await limits(database.db)).toEqual(request);
      // Each took its kind's limits with its own message (the transaction with its BEGIN, each read before
      // its SELECT): no statement of its own to switch the session (engage_database_statements_total).
      expect(switches).toHaveLength(0);
      // A background transaction that rolls back, then each kind again.
      const failed = await inBackground(() =>
        database.db.transaction().execute(async (trx) => {
          expect(await limits(trx)).toEqual(background);
          throw new Error('rolled back');
        }),
      ).catch((error: unknown) => error);
      expect(failed).toBeInstanceOf(Error);
      expect(await limits(database.db)).toEqual(request);
      expect(await inBackground(() => limits(database.db))).toEqual(background);
      // A request's transaction that a failed statement aborted (its commit is answered with a rollback).
      const committed = await database.db.transaction().execute(async (trx) => {
        expect(await limits(trx)).toEqual(request);
        return sql`select 1 / 0`.execute(trx).then(
          () => 'divided',
          () => 'caught',
        );
      });
      expect(committed).toBe('caught');
      expect(await limits(database.db)).toEqual(request);
      expect(await inBackground(() => limits(database.db))).toEqual(background);
      // A request's statement is cancelled at its limit, a background one is not.
      await expect(sql`select pg_sleep(2)`.execute(database.db)).rejects.toThrow(/statement timeout/);
      await expect(inBackground(() => sql`select pg_sleep(2)`.execute(database.db))).resolves.toBeDefined();
    } finally {
      await database.close();
    }
  });
});

describe('a process whose services run no background work once started (the API roles)', () => {
  it('stops following the kind of work only while no service holds background work, and follows it again when asked', async () => {
    const database = await oneSessionPool();
    const release = holdBackgroundWork();
    try {
      // A service with projections or jobs runs: another one starting without any changes nothing for it,
      // its background work keeps its limits across its awaits.
      const projections = inBackground(async () => {
        await sleep(20);
        const first = await limits(database.db);
        await sleep(20);
        return [first, await limits(database.db)];
      });
      await sleep(5);
      startedWithoutBackgroundWork();
      expect(await projections).toEqual([background, background]);
      expect(await limits(database.db)).toEqual(request);
      // None holds any more: the kind is no longer followed, and work asked for in the background later still
      // gets the background limits.
      release();
      // Started from background work itself (a command's own service): that work keeps its limits.
      const command = inBackground(async () => {
        startedWithoutBackgroundWork();
        await sleep(5);
        return limits(database.db);
      });
      expect(await command).toEqual(background);
      startedWithoutBackgroundWork();
      expect(await limits(database.db)).toEqual(request);
      expect(await inBackground(() => limits(database.db))).toEqual(background);
      expect(await inBackground(() => database.db.transaction().execute((trx) => limits(trx)))).toEqual(background);
      await expect(inBackground(() => sql`select pg_sleep(2)`.execute(database.db))).resolves.toBeDefined();
      expect(await limits(database.db)).toEqual(request);
    } finally {
      release();
      await database.close();
    }
  });
});

describe('a transaction that a checkout of the other kind opens first thing', () => {
  it('takes its kind’s limits with its BEGIN, without a round trip of their own, and leaves the session as it was', async () => {
    const database = await oneSessionPool();
    const purposes: string[] = [];
    database.observeStatements((purpose) => purposes.push(purpose));
    try {
      expect(await limits(database.db)).toEqual(request);
      purposes.length = 0;
      // The projector runtime's shape: BEGIN and a first statement in one message of literals, then COMMIT.
      const inside = await inBackground(() =>
        database.db.connection().execute(async (session) => {
          const first = await sql<{ statement: string }>`/* engage:checkpoint */ begin; select current_setting('statement_timeout') as statement`.execute(
            session,
          );
          const then = await limits(session);
          // The limits hold across statements of the transaction, a long one included (past the request's 1.5 s).
          await sql`select pg_sleep(1.7)`.execute(session);
          await sql`commit`.execute(session);
          return { first: first.rows[0], then };
        }),
      );
      expect(inside).toEqual({ first: { statement: '45s' }, then: background });
      expect(purposes).toEqual(['checkpoint', 'other', 'other', 'transaction']);
      // The session kept the requests' limits: a request's statement needs no switch either.
      purposes.length = 0;
      expect(await limits(database.db)).toEqual(request);
      expect(purposes).toEqual(['other']);

      // A message of reads without parameters (the shared log's page) takes its limits the same way: a
      // background read longer than a request's limit runs to its end, and the session keeps its kind.
      purposes.length = 0;
      const read = await inBackground(() =>
        sql<{ statement: string }>`/* engage:log-read */ select pg_sleep(1.7); select current_setting('statement_timeout') as statement`.execute(database.db),
      );
      expect(read.rows).toEqual([{ statement: '45s' }]);
      expect(await limits(database.db)).toEqual(request);
      expect(purposes).toEqual(['log-read', 'other']);
      // One with parameters, or one that controls a transaction, switches the session first.
      purposes.length = 0;
      expect(await inBackground(async () => (await sql<{ n: number }>`select ${2}::int as n`.execute(database.db)).rows)).toEqual([{ n: 2 }]);
      expect(await inBackground(() => limits(database.db))).toEqual(background);
      expect(await limits(database.db)).toEqual(request);
      expect(await sql<{ n: number }>`select ${3}::int as n`.execute(database.db).then(({ rows }) => rows)).toEqual([{ n: 3 }]);
      expect(await inBackground(() => limits(database.db))).toEqual(background);
      expect(purposes).toEqual(['session-limits', 'other', 'other', 'other', 'session-limits', 'other', 'other']);
      // A message that goes on past its own COMMIT switches the session first: its last statement is outside the transaction.
      purposes.length = 0;
      const past = await inBackground(() =>
        sql<{ statement: string }>`begin; select 1; commit; select current_setting('statement_timeout') as statement`.execute(database.db),
      );
      expect(past.rows).toEqual([{ statement: '45s' }]);
      expect(purposes).toEqual(['session-limits', 'transaction']);
      expect(await sql<{ n: number }>`select ${4}::int as n`.execute(database.db).then(({ rows }) => rows)).toEqual([{ n: 4 }]);
      // A transaction that names its isolation level: its limits come after its START TRANSACTION, as
      // PostgreSQL takes an isolation level only before a transaction's first query.
      purposes.length = 0;
      expect(
        await inBackground(() =>
          database.db
            .transaction()
            .setIsolationLevel('repeatable read')
            .execute((trx) => limits(trx)),
        ),
      ).toEqual(background);
      expect(purposes).toEqual(['transaction', 'other', 'transaction']);
      // A checkout that goes on after its transaction: the session switches then, outside any transaction.
      const after = await inBackground(() =>
        database.db.connection().execute(async (session) => {
          await sql`begin`.execute(session);
          await sql`rollback`.execute(session);
          return limits(session);
        }),
      );
      expect(after).toEqual(background);
      expect(await limits(database.db)).toEqual(request);
      // A request's transaction on a session left with the background limits: its own limits with its BEGIN,
      // and a request statement is cut at its limit inside it.
      expect(await inBackground(() => limits(database.db))).toEqual(background);
      const cut = await database.db
        .transaction()
        .execute(async (trx) => {
          expect(await limits(trx)).toEqual(request);
          await sql`select pg_sleep(2)`.execute(trx);
        })
        .catch((error: unknown) => error);
      expect(String(cut)).toMatch(/statement timeout/);
      expect(await inBackground(() => limits(database.db))).toEqual(background);
    } finally {
      await database.close();
    }
  });
});

describe('a statement marked short (SHORT_STATEMENT)', () => {
  it('runs under the limits its session has, whichever kind of work sends it, and leaves the session as it was', async () => {
    const database = await oneSessionPool();
    const purposes: string[] = [];
    database.observeStatements((purpose) => purposes.push(purpose));
    /** The statement limit the marked statement ran under, as one with parameters (which otherwise switches first). */
    const shortLimit = async (tag: string) =>
      (
        await sql<{
          statement: string;
        }>`${sql.raw(SHORT_STATEMENT)} /* engage:${sql.raw(tag)} */ select current_setting('statement_timeout') as statement, ${1}::int as n`.execute(
          database.db,
        )
      ).rows[0]!.statement;
    try {
      expect(await limits(database.db)).toEqual(request);
      purposes.length = 0;
      // Background work's short statements on a request session: no switch, and the session stays a request one.
      expect(await inBackground(() => shortLimit('notify'))).toBe(request.statement);
      expect(await inBackground(() => shortLimit('notify'))).toBe(request.statement);
      expect(await limits(database.db)).toEqual(request);
      expect(purposes).toEqual(['notify', 'notify', 'other']);
      // On a session background work switched: a request's short statement leaves it so, its next background checkout too.
      expect(await inBackground(() => sql`select ${1}::int as n`.execute(database.db).then(() => limits(database.db)))).toEqual(background);
      purposes.length = 0;
      expect(await shortLimit('read-your-writes')).toBe(background.statement);
      expect(await inBackground(() => limits(database.db))).toEqual(background);
      expect(purposes).toEqual(['read-your-writes', 'other']);
      // An unmarked statement with parameters still switches the session first.
      purposes.length = 0;
      await sql`select ${2}::int as n`.execute(database.db);
      expect(await limits(database.db)).toEqual(request);
      expect(purposes).toEqual(['session-limits', 'other', 'other']);
    } finally {
      await database.close();
    }
  });
});

describe("the pool's frequent statements are named, once per session", () => {
  /** The named statements of the pool's one session, as it lists them itself. */
  async function prepared(db: Kysely<any>) {
    const { rows } = await sql<{ statement: string }>`select statement from pg_prepared_statements order by statement`.execute(db);
    return rows.map((row) => row.statement);
  }

  it('names a statement with parameters from its third use, keeps its answers, and leaves others unnamed', async () => {
    const database = await oneSessionPool();
    try {
      const answers: number[] = [];
      for (let n = 1; n <= 5; n++) answers.push((await sql<{ n: number }>`select ${n}::int + 0 as n`.execute(database.db)).rows[0]!.n);
      expect(answers).toEqual([1, 2, 3, 4, 5]);
      await sql`select ${1}::int + 1 as once`.execute(database.db);
      expect(await prepared(database.db)).toEqual(['select $1::int + 0 as n']);
    } finally {
      await database.close();
    }
  });

  it('names none when told so, and at most so many a session', async () => {
    const none = await openPostgres(test.url, { max: 1, preparedStatements: 0 });
    const two = await openPostgres(test.url, { max: 1, preparedStatements: 2 });
    try {
      for (const database of [none, two]) {
        for (const k of [1, 2, 3]) for (let n = 0; n < 3; n++) await sql`select ${n}::int + ${sql.lit(k)} as n`.execute(database.db);
      }
      expect(await prepared(none.db)).toEqual([]);
      expect(await prepared(two.db)).toEqual(['select $1::int + 1 as n', 'select $1::int + 2 as n']);
    } finally {
      await none.close();
      await two.close();
    }
  });

  it('prepares a statement again when DDL changed what it returns: at once outside a transaction, at its next use inside one', async () => {
    const database = await oneSessionPool();
    try {
      await sql`create table prepared_rows (id int primary key)`.execute(database.db);
      await sql`insert into prepared_rows values (1)`.execute(database.db);
      const read = () => sql<Record<string, unknown>>`select * from prepared_rows where id = ${1}`.execute(database.db);
      for (let n = 0; n < 4; n++) await read();
      expect(await prepared(database.db)).toContain('select * from prepared_rows where id = $1');
      await sql`alter table prepared_rows add column label text default 'new'`.execute(database.db);
      // Outside a transaction: the stale plan is retired and the statement goes again, unnamed.
      expect((await read()).rows).toEqual([{ id: 1, label: 'new' }]);
      // Its next use prepares it under a new name, as it is now.
      expect((await read()).rows).toEqual([{ id: 1, label: 'new' }]);
      await sql`alter table prepared_rows add column size int default 7`.execute(database.db);
      // Inside one the failure ends the transaction, as any error does; the next use prepares it afresh.
      const inTransaction = await database.db
        .transaction()
        .execute(async (trx) => sql`select * from prepared_rows where id = ${1}`.execute(trx))
        .catch((error: unknown) => error);
      expect((inTransaction as { code?: string }).code).toBe('0A000');
      // A request that met it is told to retry: the next attempt prepares the statement afresh.
      expect(knownErrorAnswer(inTransaction)?.status).toBe(503);
      expect((await read()).rows).toEqual([{ id: 1, label: 'new', size: 7 }]);
      expect((await read()).rows).toEqual([{ id: 1, label: 'new', size: 7 }]);
    } finally {
      await sql`drop table if exists prepared_rows`.execute(database.db);
      await database.close();
    }
  });
});
