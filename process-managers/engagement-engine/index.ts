import type { CustomEventEvent } from '../../domain/custom-event.ts';
import type { GiveawayDrawnEvent, LeaderboardWindowEvent } from '../../domain/engagement-events.ts';
import { BatchTimeZones, TIME_ZONE_EVENTS, type TimeZoneEvent } from '../../projectors/organisation-time-zones.ts';
import { defineProcessManager } from '../process-manager.ts';
import { CATALOGUE_EVENTS, learn, type CatalogueEvent } from './catalogue.ts';
import { engageCustomEvents, type LoggedEvent } from './custom-events.ts';
import { grantGiveawayAssets } from './giveaway-grants.ts';
import { payRankRewards } from './rank-payouts.ts';
import { ENGINE_PROCESS, engineMigrations, type EngineState } from './state.ts';

export { assetIdOf } from './appends.ts';
export { leaderboardWindowStream } from '../../domain/engagement-events.ts';
export { readEntriesForDraw } from './reads.ts';
export { ENGINE_PROCESS, type EngineState } from './state.ts';

type EngineEvent = TimeZoneEvent | CatalogueEvent | CustomEventEvent | LeaderboardWindowEvent | GiveawayDrawnEvent;

const ENGINE_EVENTS = [
  ...TIME_ZONE_EVENTS,
  ...CATALOGUE_EVENTS,
  'CustomEventLogged',
  'LeaderboardWindowClosed',
  'GiveawayDrawn',
] as const satisfies readonly EngineEvent['type'][];

/**
 * The engagement engine: a process manager that turns custom events into engagement facts (DESIGN §6),
 * pays leaderboard rank rewards when a window closes, and grants giveaway winners their assets.
 *
 * It is the only writer of `AllocationDistributed`, and one runner at a time applies its batches (the
 * runtime's lease and checkpoint compare-and-set), so its own table of allocations is the truth it decides
 * on; it still appends at the allocation stream's revision, so even a rogue writer could not over-distribute.
 * With the PostgreSQL store its events are appended in the batch's transaction: the facts and the checkpoint
 * past their cause commit together, so nothing is decided twice or lost. Event ids derive from the cause, so
 * applying a cause again (another store, a rebuild) appends nothing new.
 *
 * A batch goes in log order: each run of custom events is engaged as one unit (`custom-events.ts`); the
 * admin side's events between runs update what the engine knows (`catalogue.ts`); a closed window pays its
 * rank rewards (`rank-payouts.ts`), a draw grants its winners' assets (`giveaway-grants.ts`). The time zones
 * a run's matching challenges need are read with its state, once a batch, and followed in memory.
 */
export const engagementEngine = defineProcessManager<EngineState, EngineEvent>({
  name: ENGINE_PROCESS,
  version: 1,
  migrations: engineMigrations,
  canHandle: ENGINE_EVENTS,
  onFailure: { attempts: 5, then: 'park' },

  async handle(db, events, context) {
    // Read when a run of custom events knows which of its organisations it needs (those with a matching challenge).
    const zones = BatchTimeZones.of(db, 'engine_organisations', [], []);
    let run: LoggedEvent[] = [];
    const engageRun = async () => {
      if (run.length > 0) await engageCustomEvents(db, run, zones, context);
      run = [];
    };
    for (const event of events) {
      if (event.type === 'CustomEventLogged') {
        run.push(event);
        continue;
      }
      await engageRun();
      switch (event.type) {
        case 'OrganisationCreated':
        case 'OrganisationSettingsChanged':
          zones.record(event);
          break;
        case 'LeaderboardWindowClosed':
          await payRankRewards(db, event, context);
          break;
        case 'GiveawayDrawn':
          await grantGiveawayAssets(db, event, context);
          break;
        default:
          await learn(db, event);
      }
    }
    await engageRun();
    await zones.save();
  },
});
