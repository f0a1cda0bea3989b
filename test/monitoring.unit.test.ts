import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { ALERTS, alertRules, dashboard, metricNames, monitoringExpressions, type DashboardPanel } from './support/monitoring.ts';

const promtool = spawnSync('promtool', ['--version'], { encoding: 'utf8' }).status === 0;
if (!promtool) console.warn('[test] promtool is not installed (Debian package `prometheus`): the alert rules are checked here without it');

/** GitHub's anchor of a Markdown heading. */
const anchorOf = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\w\- ]/g, '')
    .replace(/ /g, '-');

describe('the Grafana dashboard', () => {
  const json = dashboard();
  const panels = json.panels as DashboardPanel[];

  it('is a dashboard Grafana provisions: uid, title, schema version, a data source variable', () => {
    expect(json).toMatchObject({ uid: 'engage-overview', title: 'engage', schemaVersion: expect.any(Number) });
    expect(json.templating.list).toContainEqual(expect.objectContaining({ type: 'datasource', name: 'datasource', query: 'prometheus' }));
    // The provisioning provider reads the folder docker-compose.yml mounts the dashboards into.
    const provider = parseYaml(readFileSync('deploy/grafana/provisioning/dashboards/engage.yml', 'utf8'));
    expect(provider.providers[0].options.path).toBe('/var/lib/grafana/dashboards');
    const datasource = parseYaml(readFileSync('deploy/grafana/provisioning/datasources/prometheus.yml', 'utf8'));
    expect(datasource.datasources[0]).toMatchObject({ type: 'prometheus', url: 'http://prometheus:9090' });
  });

  it('lays its panels out on the 24-column grid without overlaps, each with a unique id and a title', () => {
    expect(new Set(panels.map((panel) => panel.id)).size).toBe(panels.length);
    const taken = new Set<string>();
    for (const panel of panels) {
      expect(panel.title, `panel ${panel.id}`).toBeTruthy();
      expect(['row', 'timeseries', 'stat', 'bargauge']).toContain(panel.type);
      const { x, y, w, h } = panel.gridPos;
      expect(x >= 0 && w > 0 && x + w <= 24 && h > 0 && y >= 0, panel.title).toBe(true);
      for (let column = x; column < x + w; column++) {
        for (let line = y; line < y + h; line++) {
          expect(taken.has(`${column},${line}`), `${panel.title} overlaps another panel`).toBe(false);
          taken.add(`${column},${line}`);
        }
      }
    }
  });

  it('queries the data source variable with PromQL that parses, one refId per query', () => {
    for (const panel of panels.filter((p) => p.type !== 'row')) {
      expect(panel.datasource, panel.title).toEqual({ type: 'prometheus', uid: '${datasource}' });
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      expect(new Set(panel.targets!.map((target) => target.refId)).size).toBe(panel.targets!.length);
      for (const target of panel.targets!) expect(metricNames(target.expr).length, `${panel.title}: ${target.expr}`).toBeGreaterThan(0);
    }
  });

  it('shows what the issue asks for: requests, latency, 5xx, appends, projection lag and parked events, jobs, memory and event loop delay', () => {
    const used = new Set(monitoringExpressions().flatMap(({ expr }) => metricNames(expr)));
    for (const metric of [
      'engage_http_request_duration_seconds_count',
      'engage_http_request_duration_seconds_bucket',
      'engage_events_appended_total',
      'engage_projection_events_behind',
      'engage_projection_seconds_behind',
      'engage_projection_parked_events',
      'engage_jobs',
      'engage_job_oldest_due_seconds',
      'process_resident_memory_bytes',
      'nodejs_eventloop_lag_p99_seconds',
    ]) {
      expect(used, metric).toContain(metric);
    }
  });
});

describe('the alert rules', () => {
  const rules = alertRules();
  const readme = readFileSync('README.md', 'utf8');
  const anchors = new Set([...readme.matchAll(/^#{1,6} (.+)$/gm)].map((match) => anchorOf(match[1]!)));

  it('cover lag, parked events, failing jobs, 5xx and readiness, each with a severity, a summary and a runbook in the README', () => {
    expect(rules.map((rule) => rule.alert)).toEqual(
      expect.arrayContaining(['EngageProjectionLagging', 'EngageEventsParked', 'EngageJobsFailing', 'EngageHigh5xxRate', 'EngageNotReady']),
    );
    for (const rule of rules) {
      expect(['warning', 'critical'], rule.alert).toContain(rule.labels?.severity);
      expect(rule.annotations?.summary, rule.alert).toBeTruthy();
      expect(rule.annotations?.description, rule.alert).toBeTruthy();
      const runbook = rule.annotations?.runbook ?? '';
      expect(runbook, rule.alert).toMatch(/^README\.md#/);
      expect(anchors, `${rule.alert}: ${runbook}`).toContain(runbook.slice('README.md#'.length));
      expect(metricNames(rule.expr).length, rule.alert).toBeGreaterThan(0);
    }
  });

  it.runIf(promtool)('pass promtool check rules, and fire in promtool test rules on the series they are meant for', () => {
    const check = spawnSync('promtool', ['check', 'rules', ALERTS], { encoding: 'utf8' });
    expect(check.status, check.stdout + check.stderr).toBe(0);
    const test = spawnSync('promtool', ['test', 'rules', 'deploy/prometheus/alerts.test.yml'], { encoding: 'utf8' });
    expect(test.status, test.stdout + test.stderr).toBe(0);
    const config = spawnSync('promtool', ['check', 'config', '--syntax-only', 'deploy/prometheus/prometheus.yml'], { encoding: 'utf8' });
    expect(config.status, config.stdout + config.stderr).toBe(0);
  });
});
