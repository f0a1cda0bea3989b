import { describe } from 'vitest';
import { eventStoreContract } from './event-store.contract.ts';

const connectionString = process.env.KURRENTDB_CONNECTION_STRING;

// KurrentDB is a server of its own that this machine does not run; docker-compose.yml does. The same
// contract runs against it whenever KURRENTDB_CONNECTION_STRING points at one.
describe.runIf(connectionString)('KurrentDB', () => {
  eventStoreContract('KurrentDB', async () => {
    const { KurrentDbEventStore } = await import('../infra/event-store/kurrentdb.ts');
    const store = KurrentDbEventStore.connect(connectionString!);
    return { store, close: () => store.close() };
  });
});
