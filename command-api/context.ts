import type { Config } from '../infra/config.ts';
import type { Database } from '../infra/database.ts';
import type { EventStore } from '../infra/event-store/port.ts';
import type { Logger } from '../infra/logging.ts';

/** What command and query handlers are given: the stores, the configuration, a logger. */
export interface ServiceContext {
  config: Config;
  database: Database;
  store: EventStore;
  logger: Logger;
}
