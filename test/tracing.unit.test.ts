import { afterEach, describe, expect, it } from 'vitest';
import type { EventStore } from '../infra/event-store/port.ts';
import { TracingConfigError, continuedTrace, inSpan, startTracing, traceBatch, tracedAppends, tracingEnabled } from '../infra/tracing.ts';

/** Tracing off (no OTLP endpoint): nothing starts, nothing is wrapped, no metadata is added. The on side is test/tracing.e2e.test.ts. */
describe('tracing, off', () => {
  const saved = { ...process.env };
  afterEach(() => {
    for (const name of ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'OTEL_SDK_DISABLED']) {
      if (saved[name] === undefined) delete process.env[name];
      else process.env[name] = saved[name];
    }
  });

  it('stays off without an endpoint, or with OTEL_SDK_DISABLED=true', async () => {
    delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
    delete process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
    expect(await startTracing({ serviceName: 'engage' })).toBe(false);
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = 'http://127.0.0.1:4318';
    process.env.OTEL_SDK_DISABLED = 'true';
    expect(await startTracing({ serviceName: 'engage' })).toBe(false);
    expect(tracingEnabled()).toBe(false);
  });

  it('refuses an endpoint that is not an http(s) URL, naming the variable', async () => {
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = 'collector:4318';
    await expect(startTracing({ serviceName: 'engage' })).rejects.toThrow(TracingConfigError);
    await expect(startTracing({ serviceName: 'engage' })).rejects.toThrow(/^OTEL_EXPORTER_OTLP_ENDPOINT: must be an http/);
    expect(tracingEnabled()).toBe(false);
  });

  it('wraps nothing and adds nothing: the store itself, the work itself, no trace context', async () => {
    const store = {} as EventStore;
    expect(tracedAppends(store)).toBe(store);
    expect(await inSpan('engage.decide', async () => 42)).toBe(42);
    expect(
      await traceBatch(
        { consumer: 'users', events: [{ metadata: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' } }] },
        async () => 'applied',
      ),
    ).toBe('applied');
    expect(continuedTrace({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' })).toBeUndefined();
  });
});
