/**
 * Each request's route label as far as it is known yet: the pattern that matched
 * (`/api/v2/admin/leaderboards/:leaderboardConfigId`), `<mount>/*` for a request refused before its route, or
 * `unmatched`. The metrics (infra/metrics.ts) label the request's duration with it; tracing names the request's
 * span after it. No imports: tracing reads it before anything else loads.
 */

/** What the router told a request so far (express sets `req.route` when a route matches, `req.baseUrl` while inside a mounted router). */
interface RouteState {
  route: { path?: unknown } | undefined;
  baseUrl: string | undefined;
  /** The pattern of the route that matched, with the mounts it is under. */
  pattern: string | undefined;
  /** The deepest mount reached (express restores `baseUrl` on the way out). */
  mount: string;
}

const ROUTE_STATE = Symbol('engage.routeState');
type Tracked = { [ROUTE_STATE]?: RouteState };
const trackedPrototypes = new WeakSet<object>();

function stateOf(req: Tracked): RouteState {
  return (req[ROUTE_STATE] ??= { route: undefined, baseUrl: undefined, pattern: undefined, mount: '' });
}

/**
 * Makes the requests of an app (`app.request`, their prototype) remember their route label: `route` and
 * `baseUrl` become accessors of the prototype that keep what the router sets in one state object per request.
 * On the prototype, not on each request: accessors defined on a request give it a hidden class of its own, so
 * every property read on requests (express's, ours) went megamorphic.
 */
export function trackRoutes(requestPrototype: object): void {
  if (trackedPrototypes.has(requestPrototype)) return;
  trackedPrototypes.add(requestPrototype);
  Object.defineProperty(requestPrototype, 'route', {
    configurable: true,
    enumerable: true,
    get(this: Tracked) {
      return this[ROUTE_STATE]?.route;
    },
    set(this: Tracked, value: { path?: unknown } | undefined) {
      const state = stateOf(this);
      state.route = value;
      if (typeof value?.path === 'string') state.pattern = `${state.baseUrl ?? ''}${value.path}`;
    },
  });
  Object.defineProperty(requestPrototype, 'baseUrl', {
    configurable: true,
    enumerable: true,
    get(this: Tracked) {
      return this[ROUTE_STATE]?.baseUrl;
    },
    set(this: Tracked, value: string) {
      const state = stateOf(this);
      state.baseUrl = value;
      if (value && value.length > state.mount.length) state.mount = value;
    },
  });
}

/** The request's route label; undefined where routes are not tracked (an app without metrics). */
export function routeLabelOf(req: object): string | undefined {
  const state = (req as Tracked)[ROUTE_STATE];
  if (!state) return undefined;
  return state.pattern ?? (state.mount ? `${state.mount}/*` : 'unmatched');
}
