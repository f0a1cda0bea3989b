import type { z } from 'zod';
import type { ServiceContext } from '../api/context.ts';
import type { settingsSchema } from '../api/contract/domains.ts';
import type { FrozenStanding } from '../domain/engagement-events.ts';
import type { Position } from '../infra/event-store/port.ts';

/** The read models a command may wait for, named by what they hold; the read side knows their projections. */
export type ReadModel = 'tenancy' | 'engagement-engine' | 'standings';

/**
 * What the command side reads from the read side. Commands decide on event streams; the few that answer
 * from, or wait for, a read model do it through this port, so command-api imports no query-api, projector
 * or process-manager internals. The composition root (service.ts) implements it over the read side.
 */
export interface CommandReads {
  /** Waits (bounded) until the read models have passed `position`; false when they have not in time. */
  caughtUp(readModels: readonly ReadModel[], position: Position, timeoutMs: number): Promise<boolean>;
  /** The organisation's settings as `GET /settings` answers them. */
  settings(organisationId: string): Promise<z.output<typeof settingsSchema>>;
  /** A leaderboard window's standings as the standings read model ranks them now. */
  rankedStandings(leaderboardId: string, windowStart: string): Promise<FrozenStanding[]>;
  /** Each user's entries in a giveaway, as the engagement engine counted them. */
  entriesForDraw(rewardId: string): Promise<{ userId: string; entries: number }[]>;
}

/** What a command that reads the read side is given: the service context and the read port. */
export interface CommandContext extends ServiceContext {
  reads: CommandReads;
}
