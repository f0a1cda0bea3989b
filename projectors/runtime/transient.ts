/**
 * Errors that say "the database is not reachable right now", not "this event cannot be applied": a worker
 * backs off and resumes on them, and never parks an event or stops for good because of one.
 */
const TRANSIENT_CODES = new Set([
  '08000', // connection_exception
  '08001', // sqlclient_unable_to_establish_sqlconnection
  '08003', // connection_does_not_exist
  '08004', // sqlserver_rejected_establishment_of_sqlconnection
  '08006', // connection_failure
  '53300', // too_many_connections
  '53400', // configuration_limit_exceeded
  '57P01', // admin_shutdown (a terminated backend)
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, shutting down)
  '57014', // query_canceled (a statement timeout)
  '40001', // serialization_failure
  '40P01', // deadlock_detected
  '55P03', // lock_not_available
  '55000', // object_not_in_prerequisite_state
  '42P01', // undefined_table: a generation's tables being made by another process
  '3F000', // invalid_schema_name: likewise
]);

const TRANSIENT_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

const TRANSIENT_MESSAGES = [
  /connection terminated/i,
  /timeout exceeded when trying to connect/i,
  /not queryable/i,
  /terminating connection/i,
  /Connection ended unexpectedly/i,
  /sorry, too many clients/i,
  /the database system is (starting up|shutting down)/i,
];

export function isTransient(error: unknown): boolean {
  const candidate = error as { code?: unknown; message?: unknown; cause?: unknown } | null;
  if (!candidate || typeof candidate !== 'object') return false;
  if (typeof candidate.code === 'string' && (TRANSIENT_CODES.has(candidate.code) || TRANSIENT_NODE_CODES.has(candidate.code))) return true;
  if (typeof candidate.message === 'string' && TRANSIENT_MESSAGES.some((pattern) => pattern.test(candidate.message as string))) return true;
  if (error instanceof AggregateError) return error.errors.some(isTransient);
  return candidate.cause !== undefined && candidate.cause !== error && isTransient(candidate.cause);
}

/** Resolves after `ms`, or at once when `signal` aborts (never rejects). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** Exponential backoff with jitter: 100 ms, 200 ms, ... up to `max`. */
export function backoff(failures: number, max = 5000): number {
  return Math.min(max, 100 * 2 ** Math.min(failures, 8)) * (0.5 + Math.random() / 2);
}
