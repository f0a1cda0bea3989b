import { randomUUID } from 'node:crypto';
import http from 'node:http';
import express, { type Express, type RequestHandler, type Response } from 'express';
import { requestLineWriter, type Logger } from '../logging.ts';
import { acceptedPathAndQuery, clientTraceId, jsonBody } from './accepted-input.ts';
import { httpMetrics, type Metrics } from '../metrics.ts';
import { trackRoutes } from './route-label.ts';
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
  requestsBornWithTheAppsPrototypes(app);
  app.disable('x-powered-by');
  app.set('trust proxy', 'loopback');
  trackRoutes(app.request);
  if (metrics) app.use(httpMetrics(metrics));
  app.use(requestLogging(app.request, logger, logRequests));
  app.use(acceptedPathAndQuery, ...jsonBody(bodyLimit));
  return app;
}

/** The classes of the requests and responses of each app made here: see requestsBornWithTheAppsPrototypes. */
const serverClasses = new WeakMap<Express, { IncomingMessage: typeof http.IncomingMessage; ServerResponse: typeof http.ServerResponse }>();

/**
 * Express gives each request and response its app's prototype (`Object.setPrototypeOf`), and V8 then gives
 * such an object a hidden class of its own at every property added to it afterwards: every property read on
 * requests and responses, in express, the router and our middleware, went megamorphic (a map allocated per
 * property per request). Here the app's prototypes become those of two classes, which `createHttpServer`
 * builds its requests and responses from: born with the app's prototype, express's `setPrototypeOf` changes
 * nothing. Servers made otherwise (`app.listen`, supertest) behave the same, only slower.
 */
function requestsBornWithTheAppsPrototypes(app: Express): void {
  class AppRequest extends http.IncomingMessage {}
  class AppResponse<Request extends http.IncomingMessage = http.IncomingMessage> extends http.ServerResponse<Request> {}
  for (const [target, source] of [
    [AppRequest.prototype, app.request],
    [AppResponse.prototype, app.response],
  ] as const) {
    for (const key of Reflect.ownKeys(source)) Object.defineProperty(target, key, Object.getOwnPropertyDescriptor(source, key)!);
    Object.setPrototypeOf(target, Object.getPrototypeOf(source) as object);
  }
  Reflect.set(app, 'request', AppRequest.prototype);
  Reflect.set(app, 'response', AppResponse.prototype);
  serverClasses.set(app, { IncomingMessage: AppRequest, ServerResponse: AppResponse });
}

/** The HTTP server of an app made by createHttpApp, its requests and responses born with the app's prototypes. */
export function createHttpServer(app: Express): http.Server {
  return http.createServer(serverClasses.get(app) ?? {}, app);
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
function requestLogging(requestPrototype: object, logger: Logger, logRequests: RequestLogging): RequestHandler {
  const succeeded = logRequests === 'off' ? 'silent' : logRequests;
  requestLoggers(requestPrototype);
  const writeLine = requestLineWriter(logger);
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
    (req as LoggingRequest)[REQUEST_LOG] = { logger, fields, res, child: null };
    let done = false;
    const complete = (error?: Error) => {
      if (done) return;
      done = true;
      res.off('close', complete).off('finish', complete).off('error', complete);
      const status = res.statusCode;
      const level = error || status >= 500 ? 'error' : status >= 400 ? 'info' : succeeded;
      if (level === 'silent' || !logger.isLevelEnabled(level)) return;
      const responseTime = Date.now() - started;
      if (level === 'error') {
        const err = error ?? new Error(`failed with status code ${status}`);
        logger[level]({ ...fields(), res: { statusCode: status }, err, responseTime }, 'request errored');
      } else {
        writeLine(level, { req: logged, traceId, organisationId: organisationOf(res), statusCode: status, responseTime }, 'request completed');
      }
    };
    res.on('close', complete).on('finish', complete).on('error', complete);
    next();
  };
}

const REQUEST_LOG = Symbol('engage.requestLog');

/** What `req.log` is made from: the process's logger, the request's fields, and the child once made. */
interface RequestLog {
  logger: Logger;
  fields: () => Record<string, unknown>;
  res: Response;
  child: { logger: Logger; organisationId: string | undefined } | null;
}

type LoggingRequest = { [REQUEST_LOG]?: RequestLog };
const loggingPrototypes = new WeakSet<object>();

/**
 * `req.log` as an accessor of the app's request prototype (a child logger made when first used, and again
 * once a token named the organisation). On the prototype, not on each request: an accessor defined on a request
 * gives it a hidden class of its own, and every property read on requests goes megamorphic.
 */
function requestLoggers(requestPrototype: object): void {
  if (loggingPrototypes.has(requestPrototype)) return;
  loggingPrototypes.add(requestPrototype);
  Object.defineProperty(requestPrototype, 'log', {
    configurable: true,
    enumerable: false,
    get(this: LoggingRequest): Logger | undefined {
      const log = this[REQUEST_LOG];
      if (!log) return undefined;
      const organisationId = organisationOf(log.res);
      if (log.child === null || log.child.organisationId !== organisationId) log.child = { logger: log.logger.child(log.fields()), organisationId };
      return log.child.logger;
    },
    set(this: LoggingRequest, value: Logger) {
      const log = this[REQUEST_LOG];
      if (log) log.child = { logger: value, organisationId: organisationOf(log.res) };
      else Object.defineProperty(this, 'log', { configurable: true, enumerable: false, writable: true, value });
    },
  });
}

function organisationOf(res: Response): string | undefined {
  return (res as Response<unknown, { tenant?: { organisationId: string } }>).locals.tenant?.organisationId;
}
