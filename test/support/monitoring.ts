import { readFileSync } from 'node:fs';
import { parser } from '@prometheus-io/lezer-promql';
import { parse as parseYaml } from 'yaml';

export const DASHBOARD = 'deploy/grafana/dashboards/engage.json';
export const ALERTS = 'deploy/prometheus/alerts.yml';

export interface DashboardPanel {
  id: number;
  type: string;
  title: string;
  gridPos: { h: number; w: number; x: number; y: number };
  datasource?: { type: string; uid: string };
  targets?: { refId: string; expr: string; datasource?: { type: string; uid: string } }[];
}

export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export const dashboard = () => JSON.parse(readFileSync(DASHBOARD, 'utf8'));
export const alertRules = (): AlertRule[] =>
  (parseYaml(readFileSync(ALERTS, 'utf8')) as { groups: { rules: AlertRule[] }[] }).groups.flatMap((group) => group.rules);

/** Grafana's variables replaced by what Prometheus would get, so the expression parses as PromQL. */
export function asPromql(expr: string): string {
  return expr.replace(/\$__rate_interval|\$__interval/g, '5m').replace(/\$\{?(\w+)\}?/g, '.*');
}

/** The metric names a PromQL expression selects, from Prometheus's own grammar (lezer-promql); throws on a syntax error. */
export function metricNames(expr: string): string[] {
  const text = asPromql(expr);
  const names: string[] = [];
  const errors: number[] = [];
  parser.parse(text).iterate({
    enter: (node) => {
      if (node.type.isError) errors.push(node.from);
      if (node.name === 'VectorSelector') {
        const identifier = node.node.getChild('Identifier');
        if (identifier) names.push(text.slice(identifier.from, identifier.to));
      }
    },
  });
  if (errors.length > 0) throw new Error(`not PromQL at ${errors[0]}: ${text}`);
  return names;
}

/** Every PromQL expression of the dashboard and the alert rules, with where it is. */
export function monitoringExpressions(): { where: string; expr: string }[] {
  const panels = (dashboard().panels as DashboardPanel[]).flatMap((panel) =>
    (panel.targets ?? []).map((target) => ({ where: `panel "${panel.title}"`, expr: target.expr })),
  );
  const variables = (dashboard().templating.list as { name: string; definition?: string }[])
    .filter((variable) => variable.definition?.startsWith('label_values('))
    .map((variable) => ({ where: `variable ${variable.name}`, expr: variable.definition!.replace(/^label_values\((.*),\s*\w+\)$/, '$1') }));
  const rules = alertRules().map((rule) => ({ where: `alert ${rule.alert}`, expr: rule.expr }));
  return [...panels, ...variables, ...rules];
}
