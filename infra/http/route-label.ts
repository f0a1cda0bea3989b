/**
 * Each request's route label as far as it is known yet: the pattern that matched
 * (`/api/v2/admin/leaderboards/:leaderboardConfigId`), `<mount>/*` for a request refused before its route, or
 * `unmatched`. The metrics (infra/metrics.ts) keep it up to date and label the request's duration with it;
 * tracing names the request's span after it. No imports: tracing reads it before anything else loads.
 */
const routeLabels = new WeakMap<object, () => string>();

export function trackRouteLabel(req: object, label: () => string): void {
  routeLabels.set(req, label);
}

export function routeLabelOf(req: object): string | undefined {
  return routeLabels.get(req)?.();
}
