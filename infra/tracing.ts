import { register } from 'node:module';
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  context,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type SpanContext,
  type TextMapGetter,
  type TextMapPropagator,
  type Tracer,
} from '@opentelemetry/api';
import type { EventMetadata, EventStore, NewEvent, StreamAppend } from './event-store/port.ts';
import { routeLabelOf } from './http/route-label.ts';

/**
 * Tracing with OpenTelemetry, off unless `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) is set.
 * Off, nothing of the SDK is loaded and every helper here is one test of a module variable before it does the
 * work it wraps. On, the standard `OTEL_*` variables configure the NodeSDK (exporter protocol, headers,
 * sampler, resource attributes, batch sizes); http, express, pg and ioredis are instrumented, and these helpers
 * add the service's own spans:
 *
 * - `engage.decide` (a command reading and folding its streams and deciding) and `engage.append` (every append);
 * - `engage.batch <consumer>`: a projection's or process manager's batch, the child of the trace of its first
 *   traced event, linked to the other traces it serves;
 * - `engage.job <kind>`: a job run, the child of the span that scheduled it.
 *
 * The thread between them is the W3C `traceparent` (and `tracestate`) each appended event carries in its
 * metadata, and each scheduled job in its row: a batch, and the events and jobs it writes, continue the trace of
 * the request whose events it applies.
 */

/** The packages whose ESM imports the loader hook intercepts: only those the instrumentations patch. */
const INSTRUMENTED_MODULES = ['http', 'https', 'express', 'pg', 'pg-pool', 'ioredis'];

/** Health checks and scrapes would be most of the traces and say nothing. */
const UNTRACED_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

/** A batch links at most this many traces besides its parent (the SDK keeps 128 links by default). */
const MAX_BATCH_LINKS = 100;

interface Tracing {
  tracer: Tracer;
  /** W3C trace context: how the trace is written into event metadata and job rows, whatever OTEL_PROPAGATORS says for HTTP. */
  propagator: TextMapPropagator;
  shutdown(): Promise<void>;
}

let tracing: Tracing | null = null;

export function tracingEnabled(): boolean {
  return tracing !== null;
}

export class TracingConfigError extends Error {}

/**
 * Starts the SDK when an OTLP endpoint is configured; resolves with whether it did. Must run before express, pg,
 * ioredis and node:http are first imported (main.ts imports everything else after it), because the
 * instrumentations patch them as they load: CommonJS `require` through require-in-the-middle, ESM `import`
 * through the loader hook registered here (import-in-the-middle, limited to the instrumented packages).
 */
export async function startTracing(defaults: { serviceName: string }): Promise<boolean> {
  // The SDK reads the OTEL_* variables from the process's environment itself: so does this.
  const env = process.env;
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!endpoint || env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  for (const name of ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT']) {
    const value = env[name];
    if (value && !/^https?:\/\/[^\s/]+/.test(value)) throw new TracingConfigError(`${name}: must be an http:// or https:// URL (OTLP over HTTP)`);
  }
  register('@opentelemetry/instrumentation/hook.mjs', import.meta.url, { data: { include: INSTRUMENTED_MODULES } });
  const [
    { NodeSDK },
    { W3CTraceContextPropagator },
    { HttpInstrumentation },
    { ExpressInstrumentation, ExpressLayerType },
    { PgInstrumentation },
    { IORedisInstrumentation },
  ] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/core'),
    import('@opentelemetry/instrumentation-http'),
    import('@opentelemetry/instrumentation-express'),
    import('@opentelemetry/instrumentation-pg'),
    import('@opentelemetry/instrumentation-ioredis'),
  ]);
  const named = Boolean(env.OTEL_SERVICE_NAME) || /(^|,)\s*service\.name\s*=/.test(env.OTEL_RESOURCE_ATTRIBUTES ?? '');
  const sdk = new NodeSDK({
    ...(named ? {} : { serviceName: defaults.serviceName }),
    instrumentations: [
      new HttpInstrumentation({
        ignoreIncomingRequestHook: (request) => UNTRACED_PATHS.has((request.url ?? '').split('?')[0]!),
        requireParentforOutgoingSpans: true,
        // The route the metrics label the request with: the express instrumentation's is confused by the many
        // routers mounted on one path (`/api/v2/admin/api/v2/admin/...`).
        applyCustomAttributesOnSpan: (span, request) => {
          const route = routeLabelOf(request);
          if (route === undefined || route === 'unmatched') return;
          span.setAttribute('http.route', route);
          span.updateName(`${request.method ?? 'GET'} ${route}`);
        },
      }),
      // Every router the request passes through would be a span of its own: the middleware and the handler say enough.
      new ExpressInstrumentation({
        ignoreLayersType: [ExpressLayerType.ROUTER],
        spanNameHook: (info, defaultName) =>
          info.layerType === ExpressLayerType.REQUEST_HANDLER ? `request handler ${routeLabelOf(info.request as object) ?? info.route}` : defaultName,
        requestHook: (span, info) => {
          if (info.layerType !== ExpressLayerType.REQUEST_HANDLER) return;
          const route = routeLabelOf(info.request as object) ?? info.route;
          span.setAttributes({ 'http.route': route, 'express.name': route });
        },
      }),
      // Only inside a trace: the projectors' and the job queue's polling would otherwise be a trace per query.
      // Statements are recorded without their parameters (tokens' hashes, bodies).
      new PgInstrumentation({ requireParentSpan: true, enhancedDatabaseReporting: false }),
      new IORedisInstrumentation({ requireParentSpan: true }),
    ],
    // Traces only: metrics are Prometheus at /metrics, logs are JSON lines on stdout.
    metricReaders: [],
    logRecordProcessors: [],
  });
  sdk.start();
  tracing = { tracer: trace.getTracer('engage'), propagator: new W3CTraceContextPropagator(), shutdown: () => sdk.shutdown() };
  return true;
}

/** Sends the spans still buffered (on shutdown); nothing when tracing is off. */
export async function stopTracing(): Promise<void> {
  const current = tracing;
  tracing = null;
  await current?.shutdown();
}

/**
 * Runs `work` in a span of its own (a child of the active one), ending it when the work settles and recording a
 * failure. Off, it only calls `work`; `attributes` is computed only when on.
 */
export function inSpan<T>(name: string, work: () => Promise<T>, attributes?: () => Attributes): Promise<T> {
  if (!tracing) return work();
  return tracing.tracer.startActiveSpan(name, { attributes: attributes?.() }, (span) => settle(span, work));
}

async function settle<T>(span: Span, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    span.recordException(error instanceof Error ? error : String(error));
    span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
    throw error;
  } finally {
    span.end();
  }
}

const metadataGetter: TextMapGetter<Record<string, unknown>> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => (typeof carrier[key] === 'string' ? carrier[key] : undefined),
};

/** The trace context an event's metadata or a job row carries, or none. */
function contextOf(carrier: Record<string, unknown> | null | undefined): SpanContext | undefined {
  if (!tracing || !carrier || typeof carrier.traceparent !== 'string') return undefined;
  return trace.getSpanContext(tracing.propagator.extract(ROOT_CONTEXT, carrier, metadataGetter));
}

/** `{traceparent, tracestate?}` of the active span, or undefined when there is none (or tracing is off). */
export function activeTraceContext(active: Context = context.active()): Record<string, string> | undefined {
  if (!tracing || !trace.getSpan(active)) return undefined;
  const carrier: Record<string, string> = {};
  tracing.propagator.inject(active, carrier, { set: (target: Record<string, string>, key, value) => (target[key] = value) });
  return carrier.traceparent ? carrier : undefined;
}

/**
 * What an event appended on behalf of `cause` carries: nothing when it continues the active trace (the append
 * writes the active span's context), else the cause's own trace context, so the effects of each request in a
 * batch that serves several continue that request's trace. Nothing when tracing is off.
 */
export function continuedTrace(cause: EventMetadata): Record<string, string> | undefined {
  if (!tracing) return undefined;
  const own = contextOf(cause);
  if (!own || own.traceId === trace.getActiveSpan()?.spanContext().traceId) return undefined;
  return typeof cause.tracestate === 'string'
    ? { traceparent: cause.traceparent as string, tracestate: cause.tracestate }
    : { traceparent: cause.traceparent as string };
}

/**
 * The store, with every append in an `engage.append` span whose trace context each appended event carries in
 * its metadata (unless it carries one already). Appends outside any trace (a projection batch of untraced
 * events) are neither traced nor stamped. Off, the store itself.
 */
export function tracedAppends<Store extends EventStore>(store: Store): Store {
  if (!tracing) return store;
  const stamp = (appends: StreamAppend[]): StreamAppend[] => {
    const carrier = activeTraceContext();
    if (!carrier) return appends;
    return appends.map((append) => ({
      ...append,
      events: append.events.map((event): NewEvent => (event.metadata?.traceparent ? event : { ...event, metadata: { ...event.metadata, ...carrier } })),
    }));
  };
  const traced = (appends: StreamAppend[], run: (stamped: StreamAppend[]) => Promise<unknown>) => {
    if (!trace.getActiveSpan()) return run(appends);
    return inSpan(
      'engage.append',
      () => run(stamp(appends)),
      () => ({
        'engage.streams': appends.map((append) => append.stream),
        'engage.events': appends.reduce((sum, append) => sum + append.events.length, 0),
      }),
    );
  };
  return new Proxy(store, {
    get(target, property) {
      const value = Reflect.get(target, property, target) as unknown;
      if (typeof value !== 'function') return value;
      const method = value as (...args: unknown[]) => Promise<unknown>;
      switch (property) {
        case 'append':
          return (stream: string, events: NewEvent[], options?: object) =>
            traced([{ stream, events }], ([stamped]) => method.call(target, stream, stamped!.events, options));
        case 'appendMultiple':
          return (appends: StreamAppend[], ...rest: unknown[]) => traced(appends, (stamped) => method.call(target, stamped, ...rest));
        case 'appendInTransaction':
          return (trx: unknown, appends: StreamAppend[], ...rest: unknown[]) => traced(appends, (stamped) => method.call(target, trx, stamped, ...rest));
        default:
          return method.bind(target);
      }
    },
  });
}

/**
 * A projection's or process manager's batch in an `engage.batch <consumer>` span: the child of the first traced
 * event's trace, linked to the others' (up to 100). A batch with no traced event, and a rebuild's batch (old
 * events, thousands at a time), runs without a span. Off, just the work.
 */
export function traceBatch<T>(
  batch: { consumer: string; events: readonly { metadata: EventMetadata }[]; building?: boolean },
  work: () => Promise<T>,
): Promise<T> {
  if (!tracing || batch.building) return work();
  const seen = new Set<string>();
  const contexts: SpanContext[] = [];
  for (const event of batch.events) {
    const found = contextOf(event.metadata);
    if (!found || seen.has(`${found.traceId}-${found.spanId}`)) continue;
    seen.add(`${found.traceId}-${found.spanId}`);
    contexts.push(found);
    if (contexts.length > MAX_BATCH_LINKS) break;
  }
  const [parent, ...others] = contexts;
  if (!parent) return work();
  const links: Link[] = others.map((other) => ({ context: other }));
  return tracing.tracer.startActiveSpan(
    `engage.batch ${batch.consumer}`,
    {
      kind: SpanKind.CONSUMER,
      links,
      attributes: {
        'engage.consumer': batch.consumer,
        'engage.batch.events': batch.events.length,
        'engage.batch.traces': new Set(contexts.map((c) => c.traceId)).size,
      },
    },
    trace.setSpanContext(ROOT_CONTEXT, parent),
    (span) => settle(span, work),
  );
}

/**
 * A job run in an `engage.job <kind>` span, the child of the span that scheduled it when its row carries a trace
 * context (a new trace otherwise). Off, just the work.
 */
export function traceJob<T>(
  job: { id: string; kind: string; attempt: number; organisationId: string | null; traceContext: Record<string, unknown> | null },
  work: () => Promise<T>,
): Promise<T> {
  if (!tracing) return work();
  const parent = contextOf(job.traceContext);
  return tracing.tracer.startActiveSpan(
    `engage.job ${job.kind}`,
    {
      kind: SpanKind.CONSUMER,
      attributes: {
        'engage.job.id': job.id,
        'engage.job.kind': job.kind,
        'engage.job.attempt': job.attempt,
        ...(job.organisationId ? { 'engage.organisation_id': job.organisationId } : {}),
      },
    },
    parent ? trace.setSpanContext(ROOT_CONTEXT, parent) : ROOT_CONTEXT,
    (span) => settle(span, work),
  );
}

/** The active trace's id, for log lines; undefined when off or outside a trace. */
export function activeTraceId(): string | undefined {
  return tracing ? trace.getActiveSpan()?.spanContext().traceId : undefined;
}
