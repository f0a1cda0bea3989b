import { PostgresEventStore } from '../infra/event-store/postgres.ts';
import { migrate } from '../service.ts';
import { eventStoreContract } from './event-store.contract.ts';
import { freshPglite } from './support/databases.ts';

eventStoreContract('PostgreSQL on PGlite (embedded)', async () => {
  const test = await freshPglite();
  await migrate(test.database.db);
  const store = new PostgresEventStore(test.database);
  return {
    store,
    async close() {
      await store.close();
      await test.drop();
    },
  };
});
