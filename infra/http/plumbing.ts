import { randomUUID } from 'node:crypto';
import express, { type Express, type Response } from 'express';
import { pinoHttp } from 'pino-http';
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
/** What the request serializer reads of pino-http's request record. */
interface SerializedRequest {
  id: unknown;
  method: string;
  url: string;
  headers?: Record<string, string | string[] | undefined>;
}

export function createHttpApp(logger: Logger, bodyLimit: string, metrics?: Metrics, logRequests: RequestLogging = 'info'): Express {
  const succeeded = logRequests === 'off' ? 'silent' : logRequests;
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', 'loopback');
  if (metrics) app.use(httpMetrics(metrics));
  app.use(
    pinoHttp({
      logger,
      genReqId: (req, res) => {
        const id = clientTraceId(req.headers['x-request-id']) ?? randomUUID();
        res.setHeader('x-request-id', id);
        return id;
      },
      customLogLevel: (_req, res, error) => (error || res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'info' : succeeded),
      // Called as the request starts (the trace is known) and as it ends (the organisation may be).
      customProps: (_req, res) => {
        const { tenant } = (res as Response<unknown, { tenant?: { organisationId: string } }>).locals;
        const organisationId = tenant?.organisationId;
        if (organisationId) return { organisationId };
        const traceId = res.headersSent ? undefined : activeTraceId();
        return traceId ? { traceId } : {};
      },
      serializers: {
        req: (req: SerializedRequest) => ({ id: req.id, method: req.method, url: req.url, host: req.headers?.host }),
        res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
      },
    }),
  );
  app.use(acceptedPathAndQuery, ...jsonBody(bodyLimit));
  return app;
}
