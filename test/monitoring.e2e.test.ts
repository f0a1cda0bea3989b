import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricNames, monitoringExpressions } from './support/monitoring.ts';
import { startTestService, type TestService } from './support/service.ts';

/** Series Prometheus makes itself for every target: no service exports them. */
const PROMETHEUS_OWN = new Set(['up']);

/** The sample names a `/metrics` text exposes, from its TYPE lines (a histogram's or summary's come with their suffixes). */
function exportedNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    names.add(name!);
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${name}${suffix}`);
    if (type === 'summary') for (const suffix of ['_sum', '_count']) names.add(`${name}${suffix}`);
  }
  return names;
}

let t: TestService;
beforeAll(async () => {
  t = await startTestService();
  await t.settle();
});
afterAll(() => t?.close());

describe('the dashboard and the alert rules', () => {
  it('name only metrics the service exports at /metrics', async () => {
    const response = await t.request('GET', '/metrics');
    expect(response.status).toBe(200);
    const exported = exportedNames(response.text);
    const missing = monitoringExpressions().flatMap(({ where, expr }) =>
      metricNames(expr)
        .filter((name) => !exported.has(name) && !PROMETHEUS_OWN.has(name))
        .map((name) => `${where}: ${name}`),
    );
    expect(missing).toEqual([]);
  });

  it('can tell readiness from /metrics: each check of /readyz as engage_ready', async () => {
    const response = await t.request('GET', '/metrics');
    const ready = Object.fromEntries([...response.text.matchAll(/^engage_ready\{check="(\w+)"\} (\d)$/gm)].map(([, check, value]) => [check, Number(value)]));
    const readyz = await t.request('GET', '/readyz');
    expect(readyz.status).toBe(200);
    expect(ready).toEqual(Object.fromEntries(Object.keys(readyz.body.checks).map((check) => [check, 1])));
  });
});
