import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresEventStore } from '../infra/event-store/postgres.ts';
import { defineProcessManager } from '../process-managers/process-manager.ts';
import { ProjectionRunner, liveGeneration, prepareProjections, runtimeDb } from '../projectors/runtime/index.ts';
import { migrate } from '../service.ts';
import { freshDatabase, type TestDatabase } from './support/databases.ts';
import { waitUntil } from './support/projections.ts';

/** What the runner logs at warn and above: a rival's win is no failure of the batch. */
const logged: { level: number; msg: string }[] = [];
const logger = pino({ level: 'warn' }, { write: (line: string) => void logged.push(JSON.parse(line) as { level: number; msg: string }) });

/** Lets the test hold the process manager inside its first batch, after it read and before it appends. */
let gate: { reached: () => void; release: Promise<void> } | null = null;

/** Answers each `Asked` with an `Answered` on a stream of its own, which must not exist yet. */
const answering = defineProcessManager<object, { type: 'Asked'; data: { question: string } }>({
  name: 'answering',
  version: 1,
  migrations: {},
  canHandle: ['Asked'],
  async handle(_db, events, context) {
    if (gate) {
      const held = gate;
      gate = null;
      held.reached();
      await held.release;
    }
    await context.append(
      events.map((event) => ({ stream: `answer-${event.data.question}`, events: [{ type: 'Answered', data: {} }], expectedRevision: 'no_stream' })),
    );
  },
});

describe('a process manager whose batch a rival applied meanwhile', () => {
  let test: TestDatabase;
  let store: PostgresEventStore;
  beforeAll(async () => {
    test = await freshDatabase();
    await migrate(test.database.db);
    await prepareProjections(test.database.db, [answering]);
    store = new PostgresEventStore(test.database);
  });
  afterAll(async () => {
    await store.close();
    await test.drop();
  });

  it('loses without retrying or parking anything: the rival’s appends and checkpoint stand, and it goes on from there', async () => {
    let reached!: () => void;
    const inside = new Promise<void>((resolve) => (reached = resolve));
    let release!: () => void;
    gate = { reached, release: new Promise<void>((resolve) => (release = resolve)) };
    await store.append('question-1', [{ type: 'Asked', data: { question: 'q1' } }]);
    const asked = await store.head();

    const runner = new ProjectionRunner(test.database, store, [answering], logger, { scanIntervalMs: 50 });
    await runner.start();
    try {
      // The runner's batch has read and decided, and holds no lock yet: a rival applies the same batch.
      await inside;
      const generation = (await liveGeneration(test.database.db, 'answering'))!;
      await test.database.db.transaction().execute(async (trx) => {
        await store.appendInTransaction(trx, [{ stream: 'answer-q1', events: [{ type: 'Answered', data: { by: 'rival' } }], expectedRevision: 'no_stream' }]);
        await runtimeDb(trx)
          .updateTable('projection_generations')
          .set({ checkpoint: asked!.position })
          .where('name', '=', 'answering')
          .where('generation', '=', generation.generation)
          .execute();
      });
      release();

      // Its append now conflicts with the rival's stream; that is the rival's doing, not a poison event.
      await store.append('question-2', [{ type: 'Asked', data: { question: 'q2' } }]);
      const head = (await store.head())!.position;
      // Positions are fixed-width hex: past `head` sorts after it (its own appends come later still).
      await waitUntil(async () => ((await liveGeneration(test.database.db, 'answering'))?.checkpoint ?? '') >= head, 20_000, 'the process manager to go on');
      expect(await runtimeDb(test.database.db).selectFrom('projection_parked').selectAll().execute()).toEqual([]);
      expect(logged.map((line) => line.msg)).toEqual([]);
      const answers = await store.readStream('answer-q1');
      expect(answers.map((event) => event.data)).toEqual([{ by: 'rival' }]);
      expect((await store.readStream('answer-q2')).map((event) => event.type)).toEqual(['Answered']);
    } finally {
      release();
      await runner.stop();
    }
  });
});
