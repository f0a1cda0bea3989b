import { randomUUID } from 'node:crypto';
import express, { type Express, type RequestHandler, type Response } from 'express';
import type { Logger } from '../logging.ts';
import { acceptedPathAndQuery, clientTraceId, jsonBody } from './accepted-input.ts';
import { httpMetrics, type Metrics } from '../metrics.ts';
import { activeTraceId } from '../tracing.ts';

/** How a request that succeeded is logged (LOG_REQUESTS): failures are logged whatever it says (4xx info, 5xx error). */
export type RequestLogging = 'info' | 'debug' | 'off';

/**
 * The concerns every route shares, written once: request ids (taken from `x-request-id` when sane, echoed
 * back), one structured log line per request (method, URL, host, status, `responseTime` in ms, the
 * organisation once a token named it, the trace id when tracing; never a body or a header), the text rules
 * of accepted-input.ts on path and query, a JSON body parser with a size limit whose body must follow them
 * too, and (given metrics) a duration histogram of every request, first so that it times requests the
 * parser refuses too.
 */
export function createHttpApp(logger: Logger, bodyLimit: string, metrics?: Metrics, logRequests: RequestLogging = 'info'): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', 'loopback');
  if (metrics) app.use(httpMetrics(metrics));
  app.use(requestLogging(logger, logRequests));
  app.use(acceptedPathAndQuery, ...jsonBody(bodyLimit));
  return app;
}

declare module 'node:http' {
  interface IncomingMessage {
    /** The request id (`x-request-id` when sane, else a new UUID), set by `requestLogging`. */
    id: string;
    /** A logger whose lines name the request (and its organisation once a token named it), made when first used. */
    log: Logger;
  }
}

/** A request as its log lines name it, taken as it arrives (before routers rewrite the URL). */
interface LoggedRequest {
  id: string;
  method: string | undefined;
  url: string | undefined;
  host: string | undefined;
}

/**
 * The request id and the request's log: one line as the response finishes (or the connection closes first),
 * at `info` or `debug` for a success (none when off), `info` for a 4xx, `error` for a 5xx or a failed
 * response, with `req` ({id, method, url, host}), `traceId` (when tracing, as the request started),
 * `organisationId` (once a token named it), `res` ({statusCode}), `responseTime` (ms) and, failed, `err`;
 * messages `request completed` / `request errored` (pino-http's lines, written without a child logger per
 * request). `req.log` is a child logger with the same fields, made only when a route logs something.
 */
function requestLogging(logger: Logger, logRequests: RequestLogging): RequestHandler {
  const succeeded = logRequests === 'off' ? 'silent' : logRequests;
  return (req, res, next) => {
    const started = Date.now();
    const id = clientTraceId(req.headers['x-request-id']) ?? randomUUID();
    req.id = id;
    res.setHeader('x-request-id', id);
    const logged: LoggedRequest = { id, method: req.method, url: req.originalUrl ?? req.url, host: req.headers.host };
    const traceId = activeTraceId();
    const fields = (): Record<string, unknown> => {
      const organisationId = organisationOf(res);
      return { req: logged, ...(traceId ? { traceId } : {}), ...(organisationId ? { organisationId } : {}) };
    };
    let child: { logger: Logger; organisationId: string | undefined } | null = null;
    Object.defineProperty(req, 'log', {
      configurable: true,
      enumerable: false,
      get() {
        const organisationId = organisationOf(res);
        if (child === null || child.organisationId !== organisationId) child = { logger: logger.child(fields()), organisationId };
        return child.logger;
      },
      set(value: Logger) {
        child = { logger: value, organisationId: organisationOf(res) };
      },
    });
    let done = false;
    const complete = (error?: Error) => {
      if (done) return;
      done = true;
      res.off('close', complete).off('finish', complete).off('error', complete);
      const status = res.statusCode;
      const level = error || status >= 500 ? 'error' : status >= 400 ? 'info' : succeeded;
      if (level === 'silent' || !logger.isLevelEnabled(level)) return;
      const responseTime = Date.now() - started;
      if (error || status >= 500) {
        const err = error ?? new Error(`failed with status code ${status}`);
        logger[level]({ ...fields(), res: { statusCode: status }, err, responseTime }, 'request errored');
      } else {
        logger[level]({ ...fields(), res: { statusCode: status }, responseTime }, 'request completed');
      }
    };
    res.on('close', complete).on('finish', complete).on('error', complete);
    next();
  };
}

function organisationOf(res: Response): string | undefined {
  return (res as Response<unknown, { tenant?: { organisationId: string } }>).locals.tenant?.organisationId;
}
