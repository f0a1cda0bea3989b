import { AsyncLocalStorage } from 'node:async_hooks';
import { pino, type Logger as PinoLogger } from 'pino';

export type Logger = PinoLogger;

/** Fields every line logged inside `withLogContext` carries, whichever logger writes it (a job's organisation). */
const logContext = new AsyncLocalStorage<Record<string, unknown>>();

export function withLogContext<T>(bindings: Record<string, unknown>, work: () => T): T {
  return logContext.run(bindings, work);
}

/** The service's logger: JSON lines on stdout (or `destination`, where tests read them). */
export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  const options = {
    level,
    base: { service: 'engage' },
    // A copy: pino merges the line's own fields into what the mixin returns.
    mixin: () => ({ ...logContext.getStore() }),
    redact: { paths: ['req.headers["x-api-token"]', 'req.headers.authorization'], censor: '[redacted]' },
  };
  return destination ? pino(options, destination) : pino(options);
}
