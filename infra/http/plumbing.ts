import { randomUUID } from 'node:crypto';
import express, { type Express } from 'express';
import { pinoHttp } from 'pino-http';
import type { Logger } from '../logging.ts';
import { acceptedPathAndQuery, clientTraceId, jsonBody } from './accepted-input.ts';
import { httpMetrics, type Metrics } from '../metrics.ts';

/**
 * The concerns every route shares, written once: request ids (taken from `x-request-id` when sane, echoed
 * back), one structured log line per request, the text rules of accepted-input.ts on path and query, a
 * JSON body parser with a size limit whose body must follow them too, and (given metrics) a duration
 * histogram of every request, first so that it times requests the parser refuses too.
 */
export function createHttpApp(logger: Logger, bodyLimit: string, metrics?: Metrics): Express {
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
      customLogLevel: (_req, res, error) => (error || res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'info' : 'debug'),
      serializers: {
        req: (req) => ({ id: req.id, method: req.method, url: req.url, host: req.headers?.host }),
        res: (res) => ({ statusCode: res.statusCode }),
      },
    }),
  );
  app.use(acceptedPathAndQuery, ...jsonBody(bodyLimit));
  return app;
}
