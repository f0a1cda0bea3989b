import type { ErrorRequestHandler, RequestHandler } from 'express';
import { ZodError } from 'zod';
import { DomainError } from '../../domain/decider.ts';
import { EventIdConflictError, WrongExpectedRevisionError } from '../event-store/port.ts';
import { isStalePreparedStatement } from '../database.ts';

/** The contract's error body: `{message, code, issues?}`. */
export interface ErrorBody {
  message: string;
  code: string;
  issues?: { message: string; path?: (string | number)[] }[];
}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly issues?: ErrorBody['issues'],
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

export const badRequest = (issues: ErrorBody['issues'] = [], message = 'Invalid input data') => new HttpError(400, 'BAD_REQUEST', message, issues);
export const unauthorized = (message = 'Unauthorized') => new HttpError(401, 'UNAUTHORIZED', message);
export const forbidden = (message = 'Forbidden') => new HttpError(403, 'FORBIDDEN', message);
export const notFound = (message = 'Not found') => new HttpError(404, 'NOT_FOUND', message);
export const conflict = (message: string) => new HttpError(409, 'CONFLICT', message);
export const gone = (message = 'Gone') => new HttpError(410, 'GONE', message);
export const serviceUnavailable = (message: string, retryAfterSeconds = 1) =>
  new HttpError(503, 'SERVICE_UNAVAILABLE', message, undefined, { 'Retry-After': String(retryAfterSeconds) });

export function zodIssues(error: ZodError): NonNullable<ErrorBody['issues']> {
  return error.issues.map((issue) => ({
    message: issue.path.length ? `${issue.path.join('.')}: ${issue.message}` : issue.message,
    path: issue.path.map((segment) => (typeof segment === 'symbol' ? String(segment) : segment)),
  }));
}

export const unknownRoute: RequestHandler = (req, _res, next) => {
  next(notFound(`No route for ${req.method} ${req.path}`));
};

/** Every error leaves as the contract's body; a 500 says nothing of the internals (they go to the log). */
export const errorHandler: ErrorRequestHandler = (error, req, res, _next) => {
  const known = toHttpError(error);
  if (!known) req.log?.error({ err: error }, 'unhandled error');
  const answer = known ?? new HttpError(500, 'INTERNAL_SERVER_ERROR', 'Internal server error');
  if (res.headersSent) return;
  res.status(answer.status).set(answer.headers).json(errorBodyOf(answer));
};

/** The contract's answer to a known error (what the error handler sends for it), or null for an unexpected one. */
export function knownErrorAnswer(error: unknown): { status: number; body: ErrorBody } | null {
  const known = toHttpError(error);
  return known ? { status: known.status, body: errorBodyOf(known) } : null;
}

function errorBodyOf(error: HttpError): ErrorBody {
  return { message: error.message, code: error.code, ...(error.issues ? { issues: error.issues } : {}) };
}

function toHttpError(error: unknown): HttpError | null {
  if (error instanceof HttpError) return error;
  if (error instanceof ZodError) return badRequest(zodIssues(error));
  if (error instanceof DomainError) {
    if (error.kind === 'invalid') return badRequest([{ message: error.message, ...(error.path ? { path: error.path } : {}) }]);
    if (error.kind === 'not_found') return notFound(error.message);
    return conflict(error.message);
  }
  if (error instanceof WrongExpectedRevisionError || error instanceof EventIdConflictError) {
    return conflict('The resource was changed by another request; retry with fresh data');
  }
  if (isStoreUnavailable(error)) return serviceUnavailable('A backing store is unavailable');
  return null;
}

// A store that cannot answer now: refused or lost connections, and every time-out on the way (connect, a
// free connection in the pool, the server's statement, idle-in-transaction and lock timeouts, and the
// process's own wait for an answer: DatabaseTimeoutError's ETIMEDOUT), and a prepared statement whose plan
// DDL had made stale inside a transaction (once: it is prepared afresh, see StatementNames). A retry may
// well succeed: 503.
const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', '57P01', '08006', '08001', '57014', '25P03', '55P03', '57P03', '53300']);
const UNAVAILABLE_MESSAGES = /timeout exceeded when trying to connect|Connection terminated/i;

function isStoreUnavailable(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return (
    (typeof code === 'string' && UNAVAILABLE_CODES.has(code)) ||
    (typeof message === 'string' && UNAVAILABLE_MESSAGES.test(message)) ||
    isStalePreparedStatement(error)
  );
}
