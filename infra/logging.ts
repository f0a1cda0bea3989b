import { AsyncLocalStorage } from 'node:async_hooks';
import { pino, type Logger as PinoLogger } from 'pino';

export type Logger = PinoLogger;

/** Fields every line logged inside `withLogContext` carries, whichever logger writes it (a job's organisation). */
const logContext = new AsyncLocalStorage<Record<string, unknown>>();

export function withLogContext<T>(bindings: Record<string, unknown>, work: () => T): T {
  return logContext.run(bindings, work);
}

/**
 * The service's logger: JSON lines on stdout (or `destination`, where tests read them). Stdout is written
 * asynchronously: lines logged while a write is in flight go out together in the next one, instead of a
 * blocking write per line (a request's line was a system call on the request's path; under 700 requests/s
 * those writes took 7% of the service's time). They are flushed when the process exits, however it exits;
 * a `kill -9` loses the lines of the last write in flight, never an acknowledged request.
 */
/**
 * Stdout is written once this much is waiting (about 15 request lines), or every STDOUT_FLUSH_MS whatever is
 * waiting: under load a line's write was one system call of its own per request, even asynchronous, because
 * each write finished before the next line arrived.
 */
const STDOUT_BATCH_BYTES = 4096;
const STDOUT_FLUSH_MS = 100;

export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  const options = {
    level,
    base: { service: 'engage' },
    // A copy: pino merges the line's own fields into what the mixin returns.
    mixin: () => ({ ...logContext.getStore() }),
    redact: { paths: ['req.headers["x-api-token"]', 'req.headers.authorization'], censor: '[redacted]' },
  };
  return pino(options, destination ?? pino.destination({ dest: 1, sync: false, minLength: STDOUT_BATCH_BYTES, periodicFlush: STDOUT_FLUSH_MS }));
}
