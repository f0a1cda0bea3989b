import type { JobHandler } from '../infra/jobs.ts';
import type { ServiceContext } from './context.ts';

/**
 * The handlers of timed and outside work, by job kind. Process managers (in `projectors/`) schedule the
 * jobs as they read the event stream; a handler makes its effect idempotent (deterministic event ids),
 * since a job can run again after a crash.
 */
export function jobHandlers(_ctx: ServiceContext): Record<string, JobHandler> {
  return {};
}
