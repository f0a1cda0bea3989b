import type { Clock } from '../infra/clock.ts';
import type { Config } from '../infra/config.ts';
import type { Database } from '../infra/database.ts';
import type { AppendGuard, EventMetadata, EventStore } from '../infra/event-store/port.ts';
import type { Logger } from '../infra/logging.ts';

/** What command and query handlers are given: the stores, the configuration, a logger, the clock. */
export interface ServiceContext {
  config: Config;
  database: Database;
  store: EventStore;
  logger: Logger;
  clock: Clock;
}

/**
 * Who asks, as use cases take it (no express): the organisation, the API token, the metadata its events carry
 * (`occurredAt` is now) and, for a token not proven yet, the guard its appends carry.
 */
export interface Caller {
  organisationId: string;
  tokenId: string;
  metadata: EventMetadata;
  /** What the request's appends must hold to, while its token is not proven (infra/auth.ts `TokenCheck`). */
  appendGuard?: AppendGuard | undefined;
}
