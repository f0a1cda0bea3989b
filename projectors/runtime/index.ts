// The projector runtime's public face; its parts are split by concern in this folder.
export type { BatchContext, Consumer, Recorded } from './consumer.ts';
export {
  effectiveCheckpoint,
  generationRow,
  liveGeneration,
  prepareProjections,
  projectionRuntimeMigrations,
  schemaOf,
  startRebuild,
  runtimeDb,
  type GenerationRow,
} from './generations.ts';
export { ProjectionRunner, type RuntimeOptions } from './runner.ts';
export { projectionStatus, waitForProjections, waitForProjectionsAndConsequences, type ProjectionStatus } from './status.ts';
export { sleep } from './transient.ts';
export type { LogPage } from './shared-log.ts';
export { PROCESS_MANAGER_BATCH } from './worker.ts';
