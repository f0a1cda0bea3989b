import type { RequestHandler } from 'express';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { categoryOf, type EventStore, type StreamAppend } from './event-store/port.ts';
import { routeLabelOf } from './http/route-label.ts';
import { RequestsInFlight } from './requests-in-flight.ts';

/**
 * Prometheus metrics of one service instance, in a registry of its own (never prom-client's global one),
 * so several services in one process (tests) keep apart. Request and append metrics are counted as they
 * happen; projection and job gauges are read from the database when `/metrics` is scraped
 * (query-api/health.ts), so every process reports the same, whichever one does the work.
 */
export interface Metrics {
  registry: Registry;
  /** The requests this process's HTTP apps are serving (counted by `httpMetrics`). */
  requestsInFlight: RequestsInFlight;
  httpRequestDuration: Histogram<'method' | 'route' | 'status'>;
  eventsAppended: Counter<'category'>;
  databaseStatements: Counter<'purpose'>;
  projectionEventsBehind: Gauge<'projection' | 'status'>;
  projectionSecondsBehind: Gauge<'projection' | 'status'>;
  projectionParked: Gauge<'projection' | 'status'>;
  jobs: Gauge<'kind' | 'state'>;
  jobsRetrying: Gauge<'kind'>;
  jobOldestDueSeconds: Gauge;
  scrapeErrors: Counter<'source'>;
  ready: Gauge<'check'>;
}

export function createMetrics(options: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    registry,
    requestsInFlight: new RequestsInFlight(),
    httpRequestDuration: new Histogram({
      name: 'engage_http_request_duration_seconds',
      help: 'HTTP requests by method, route pattern and status',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    eventsAppended: new Counter({
      name: 'engage_events_appended_total',
      help: 'Events in successful appends by this process, by stream category (a re-append of known event ids counts again)',
      labelNames: ['category'],
      registers,
    }),
    databaseStatements: new Counter({
      name: 'engage_database_statements_total',
      help: 'Statements this process sent to PostgreSQL, by purpose (append, notify, stream-read, log-read, auth, auth-version, transaction, other); a group-committed statement counts once for all its appends',
      labelNames: ['purpose'],
      registers,
    }),
    projectionEventsBehind: new Gauge({
      name: 'engage_projection_events_behind',
      help: 'Events of the log after the projection generation checkpoint',
      labelNames: ['projection', 'status'],
      registers,
    }),
    projectionSecondsBehind: new Gauge({
      name: 'engage_projection_seconds_behind',
      help: 'Age of the oldest event the projection generation has not applied',
      labelNames: ['projection', 'status'],
      registers,
    }),
    projectionParked: new Gauge({
      name: 'engage_projection_parked_events',
      help: 'Events parked by the projection generation after repeated handler failures',
      labelNames: ['projection', 'status'],
      registers,
    }),
    jobs: new Gauge({
      name: 'engage_jobs',
      help: 'Jobs in scheduled_jobs by kind and state (scheduled, due, running, done, failed)',
      labelNames: ['kind', 'state'],
      registers,
    }),
    jobsRetrying: new Gauge({
      name: 'engage_jobs_retrying',
      help: 'Pending jobs whose last attempt failed',
      labelNames: ['kind'],
      registers,
    }),
    jobOldestDueSeconds: new Gauge({
      name: 'engage_job_oldest_due_seconds',
      help: 'How long the longest-waiting due job has been due (0 when nothing is due)',
      registers,
    }),
    scrapeErrors: new Counter({
      name: 'engage_metrics_scrape_errors_total',
      help: 'Gauges that could not be read at scrape time, by source',
      labelNames: ['source'],
      registers,
    }),
    ready: new Gauge({
      name: 'engage_ready',
      help: 'The readiness checks of /readyz at scrape time, by check (postgres, eventStore, redis, projections): 1 ok, 0 down',
      labelNames: ['check'],
      registers,
    }),
  };
}

/**
 * Times every request; the route label is the pattern that matched (`/api/v2/admin/leaderboards/:id`),
 * never the raw URL. A request no route took (unknown path, refused before its route, such as a 401)
 * is labelled with the deepest mount it reached plus `/*`, or `unmatched`. The app's requests must track
 * their routes (`trackRoutes(app.request)`, http/route-label.ts).
 */
export function httpMetrics(metrics: Metrics): RequestHandler {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    metrics.requestsInFlight.enter();
    res.once('close', () => metrics.requestsInFlight.leave());
    res.once('finish', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      metrics.httpRequestDuration.observe({ method: req.method, route: routeLabelOf(req) ?? 'unmatched', status: String(res.statusCode) }, seconds);
    });
    next();
  };
}

/**
 * The store, counting the events of every successful append. A proxy keeps the store's class (the
 * projector runtime appends inside its batch transaction when it sees the PostgreSQL store) and calls
 * the store's own methods, so an append that calls another append internally counts once.
 */
export function countingAppends<Store extends EventStore>(store: Store, metrics: Metrics): Store {
  const count = (appends: Pick<StreamAppend, 'stream' | 'events'>[]) => {
    for (const append of appends) if (append.events.length > 0) metrics.eventsAppended.inc({ category: categoryOf(append.stream) }, append.events.length);
  };
  return new Proxy(store, {
    get(target, property) {
      const value = Reflect.get(target, property, target) as unknown;
      if (typeof value !== 'function') return value;
      if (property === 'append') {
        return async (stream: string, events: StreamAppend['events'], options?: object) => {
          const result = await (target as EventStore).append(stream, events, options);
          count([{ stream, events }]);
          return result;
        };
      }
      if (property === 'appendMultiple' || property === 'appendInTransaction') {
        return async (...args: unknown[]) => {
          const result = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          count((property === 'appendMultiple' ? args[0] : args[1]) as StreamAppend[]);
          return result;
        };
      }
      return (value as (...a: unknown[]) => unknown).bind(target);
    },
  });
}
