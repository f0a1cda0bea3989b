import { AsyncLocalStorage } from 'node:async_hooks';
import { pino, type Logger as PinoLogger } from 'pino';

export type Logger = PinoLogger;

/** Fields every line logged inside `withLogContext` carries, whichever logger writes it (a job's organisation). */
const logContext = new AsyncLocalStorage<Record<string, unknown>>();

export function withLogContext<T>(bindings: Record<string, unknown>, work: () => T): T {
  return logContext.run(bindings, work);
}

/**
 * Stdout is written asynchronously and in batches: lines wait until STDOUT_BATCH_BYTES are waiting (about 15
 * request lines) or for STDOUT_FLUSH_MS at most, then go out in one write. A blocking write per line was a
 * system call on every request's path (7% of the service's time at 700 requests/s); an asynchronous one still
 * wrote each line on its own under load, each write done before the next line came (the command API at 16
 * connections, interleaved: 0.33-0.45 ms of CPU a request batched against 0.40-0.54, 2026-12-02). Lines are
 * flushed when the process exits, however it exits; a `kill -9` loses the lines still waiting (at most
 * STDOUT_FLUSH_MS of them), never an acknowledged request.
 */
const STDOUT_BATCH_BYTES = 4096;
const STDOUT_FLUSH_MS = 100;

/** The service's logger: JSON lines on stdout, or on `destination` (where tests read them). */
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

/** What a request's line says besides the logger's own fields (plumbing.ts `requestLogging`). */
export interface RequestLine {
  req: { id: string; method: string | undefined; url: string | undefined; host: string | undefined };
  traceId: string | undefined;
  organisationId: string | undefined;
  statusCode: number;
  responseTime: number;
}

type LineLevel = 'info' | 'debug';

// pino's own parts of a line (pino.symbols: its level's opening, time, bindings, end...), read and never changed.
const PINO_PARTS = ['lsCacheSym', 'timeSym', 'chindingsSym', 'endSym', 'mixinSym', 'streamSym', 'messageKeySym', 'msgPrefixSym'] as const;
const PINO_CHECKS = ['nestedKeySym', 'serializersSym', 'formattersSym', 'hooksSym', 'needsMetadataGsym'] as const;
type PinoSymbols = Record<(typeof PINO_PARTS)[number] | (typeof PINO_CHECKS)[number], symbol>;
const pinoSymbols: PinoSymbols | null = (() => {
  const symbols = pino.symbols as unknown as Record<string, unknown>;
  return [...PINO_PARTS, ...PINO_CHECKS].every((name) => typeof symbols[name] === 'symbol') ? (symbols as PinoSymbols) : null;
})();

/**
 * Writes a request's line (`request completed`) as `logger[level]({ req, traceId, organisationId, res:
 * { statusCode }, responseTime }, msg)` writes it, the same bytes, without pino's generic work on a line
 * whose fields are known (its redaction, which copies `req` for headers a request line never holds, and a
 * walk of every field for serializers). Measured, not explained: in a loop pino takes 7-9 µs a line, but
 * the command API took 0.38-0.54 ms of CPU a custom event through it against 0.32-0.39 this way (16
 * connections, five interleaved pairs, 2026-12-06). Where the logger does anything more with a line (a
 * formatter, a nested key, a serializer of these fields, a stream hook or one that reads each line's
 * level, a mixin with fields, as in a job's log context), the line goes through pino.
 */
export function requestLineWriter(logger: Logger): (level: LineLevel, line: RequestLine, msg: string) => void {
  // pino leaves out a field that is undefined (a request without a trace or an organisation).
  const throughPino = (level: LineLevel, { req, traceId, organisationId, statusCode, responseTime }: RequestLine, msg: string) =>
    logger[level]({ req, traceId, organisationId, res: { statusCode }, responseTime }, msg);
  if (!pinoSymbols) return throughPino; // another pino than the one this was written against
  const { lsCacheSym, timeSym, chindingsSym, endSym, mixinSym, streamSym, messageKeySym, msgPrefixSym } = pinoSymbols;
  const { nestedKeySym, serializersSym, formattersSym, hooksSym, needsMetadataGsym } = pinoSymbols;
  const internals = logger as unknown as Record<symbol, unknown>;
  const serializers = (internals[serializersSym] ?? {}) as Record<string, unknown>;
  const stream = internals[streamSym] as { write?: unknown; [metadata: symbol]: unknown } | undefined;
  const plain =
    typeof internals[lsCacheSym] === 'object' &&
    typeof internals[timeSym] === 'function' &&
    typeof internals[chindingsSym] === 'string' &&
    typeof internals[endSym] === 'string' &&
    typeof internals[messageKeySym] === 'string' &&
    typeof stream?.write === 'function' &&
    stream[needsMetadataGsym] !== true &&
    (internals[formattersSym] as { log?: unknown } | undefined)?.log === undefined &&
    !internals[nestedKeySym] &&
    (internals[hooksSym] as { streamWrite?: unknown } | undefined)?.streamWrite === undefined &&
    !['req', 'traceId', 'organisationId', 'res', 'responseTime'].some((key) => serializers[key] !== undefined);
  if (!plain) return throughPino;
  return (level, line, msg) => {
    const mixin = internals[mixinSym] as ((obj: object, num: number, logger: Logger) => object) | undefined;
    if (mixin) {
      if (Object.keys(mixin({}, logger.levels.values[level]!, logger)).length > 0) return throughPino(level, line, msg);
    }
    const prefix = internals[msgPrefixSym] as string | undefined;
    const text =
      (internals[lsCacheSym] as Record<number, string>)[logger.levels.values[level]!]! +
      (internals[timeSym] as (this: Logger) => string).call(logger) +
      (internals[chindingsSym] as string) +
      `,"req":${JSON.stringify(line.req)}` +
      (line.traceId ? `,"traceId":${JSON.stringify(line.traceId)}` : '') +
      (line.organisationId ? `,"organisationId":${JSON.stringify(line.organisationId)}` : '') +
      `,"res":{"statusCode":${line.statusCode}},"responseTime":${line.responseTime}` +
      `,${JSON.stringify(internals[messageKeySym])}:${JSON.stringify(typeof prefix === 'string' ? prefix + msg : msg)}` +
      (internals[endSym] as string);
    (internals[streamSym] as { write(text: string): unknown }).write(text);
  };
}
