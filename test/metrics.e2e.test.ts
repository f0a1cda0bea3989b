import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asTenant, startTestService, type Tenant, type TestService } from './support/service.ts';

/** `/metrics` after some traffic: series per route pattern and status, appends, projection lag, jobs. */
let t: TestService;
let other: TestService;
let acme: Tenant;

/** Prometheus text format → `name{labels}` → value. */
function parse(text: string): Map<string, number> {
  const series = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    series.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return series;
}

async function scrape(service: TestService) {
  const response = await service.request('GET', '/metrics');
  expect(response.status).toBe(200);
  expect(response.headers['content-type']).toMatch(/^text\/plain/);
  return parse(response.text);
}

beforeAll(async () => {
  [t, other] = await Promise.all([startTestService(), startTestService()]);
  acme = await t.createOrganisation('acme');
  await t.settle();
});
afterAll(() => Promise.all([t?.close(), other?.close()]));

describe('/metrics', () => {
  it('times requests by method, route pattern and status, never by raw URL', async () => {
    expect((await t.request('GET', '/api/v2/admin/leaderboards', asTenant(acme))).status).toBe(200);
    expect((await t.request('GET', '/api/v2/admin/leaderboards', asTenant(acme))).status).toBe(200);
    expect((await t.request('GET', '/api/v2/admin/leaderboards/0123456789abcdef01234567', asTenant(acme))).status).toBe(404);
    expect((await t.request('GET', '/api/v2/admin/leaderboards', { host: acme.domain })).status).toBe(401);
    expect((await t.request('GET', '/no/such/path/4242')).status).toBe(404);

    const series = await scrape(t);
    const count = (labels: string) => series.get(`engage_http_request_duration_seconds_count{${labels}}`);
    expect(count('method="GET",route="/api/v2/admin/leaderboards",status="200"')).toBe(2);
    expect(count('method="GET",route="/api/v2/admin/leaderboards/:leaderboardConfigId",status="404"')).toBe(1);
    expect(count('method="GET",route="/api/v2/admin/*",status="401"')).toBe(1);
    expect(count('method="GET",route="unmatched",status="404"')).toBe(1);
    expect(series.get('engage_http_request_duration_seconds_bucket{le="+Inf",method="GET",route="/api/v2/admin/leaderboards",status="200"}')).toBe(2);
    const routes = [...series.keys()].filter((key) => key.startsWith('engage_http_request_duration_seconds_count')).join('\n');
    expect(routes).not.toMatch(/0123456789abcdef01234567|4242/);
  });

  it('counts appended events and reads projection lag, parked events and jobs at scrape time', async () => {
    const series = await scrape(t);
    expect(series.get('engage_events_appended_total{category="organisation"}')).toBeGreaterThanOrEqual(1);
    expect(series.get('engage_events_appended_total{category="domain"}')).toBeGreaterThanOrEqual(1);
    for (const name of ['organisations', 'leaderboards', 'users']) {
      expect(series.get(`engage_projection_events_behind{projection="${name}",status="live"}`)).toBeGreaterThanOrEqual(0);
      expect(series.get(`engage_projection_seconds_behind{projection="${name}",status="live"}`)).toBeGreaterThanOrEqual(0);
      expect(series.get(`engage_projection_parked_events{projection="${name}",status="live"}`)).toBe(0);
    }
    expect(series.has('engage_job_oldest_due_seconds')).toBe(true);
    expect(series.get('engage_metrics_scrape_errors_total{source="projections"}') ?? 0).toBe(0);

    await t.service.database.db
      .insertInto('scheduled_jobs')
      .values({ id: 'metrics-test:1', kind: 'metrics-test', payload: '{}', due_at: '2100-01-01T00:00:00Z' })
      .execute();
    const after = await scrape(t);
    expect(after.get('engage_jobs{kind="metrics-test",state="scheduled"}')).toBe(1);
    expect(after.get('engage_jobs{kind="metrics-test",state="failed"}')).toBe(0);
  });

  it('keeps each service instance in its own registry', async () => {
    const first = await scrape(other);
    expect(first.get('engage_http_request_duration_seconds_count{method="GET",route="/api/v2/admin/leaderboards",status="200"}')).toBeUndefined();
    expect(first.get('engage_events_appended_total{category="organisation"}')).toBeUndefined();
    // A scrape is timed once it has answered: the next one shows it.
    const second = await scrape(other);
    expect(second.get('engage_http_request_duration_seconds_count{method="GET",route="/metrics",status="200"}')).toBe(1);
  });
});
