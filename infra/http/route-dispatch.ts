import type { NextFunction, RequestHandler, Router } from 'express';

/**
 * The routers of an API family, mounted on one path, as one handler that enters only the routers that can
 * take the request: those with a route whose path starts with the request's first segment, and those that
 * cannot be told apart by it (a middleware of their own, a first segment that is a parameter or a pattern).
 * They are entered in their order, each one's `next` going on to the next one, as express would; only the
 * walk through routers that cannot match is skipped (it was most of the CPU express spent on a request
 * mounted late in a family of twenty routers). Routes are read when the first request arrives, so the
 * routers must be complete by then.
 */
export function dispatchByFirstSegment(routers: Router[]): RequestHandler {
  let index: { bySegment: Map<string, Router[]>; otherwise: Router[] } | null = null;
  return (req, res, next) => {
    index ??= indexOf(routers);
    const segment = firstSegmentOf(req.path);
    const candidates = segment === null ? routers : (index.bySegment.get(segment) ?? index.otherwise);
    let position = 0;
    const step: NextFunction = (error?: unknown) => {
      if (error) {
        next(error);
        return;
      }
      const router = candidates[position++];
      if (router) router(req, res, step);
      else next();
    };
    step();
  };
}

function indexOf(routers: Router[]): { bySegment: Map<string, Router[]>; otherwise: Router[] } {
  const segmentsOf = routers.map(literalFirstSegments);
  const known = new Set(segmentsOf.flatMap((segments) => (segments ? [...segments] : [])));
  const bySegment = new Map<string, Router[]>();
  for (const segment of known)
    bySegment.set(
      segment,
      routers.filter((_, i) => segmentsOf[i] === null || segmentsOf[i]!.has(segment)),
    );
  return { bySegment, otherwise: routers.filter((_, i) => segmentsOf[i] === null) };
}

/** A first segment routes compare literally: letters, digits and `-._~` (ASCII only, so lowercasing is exact). */
const LITERAL_FIRST_SEGMENT = /^\/([\w.~-]+)(?:\/|$)/;

/**
 * The first segments (lowercased: routing is case-insensitive) of every route of the router, or null when
 * a layer may take a path whatever its first segment (a middleware, a parameter, a pattern).
 */
function literalFirstSegments(router: Router): Set<string> | null {
  const segments = new Set<string>();
  for (const layer of router.stack as { route?: unknown; rawPath?: unknown }[]) {
    if (!layer.route) return null;
    for (const path of Array.isArray(layer.rawPath) ? (layer.rawPath as unknown[]) : [layer.rawPath]) {
      const match = typeof path === 'string' ? LITERAL_FIRST_SEGMENT.exec(path) : null;
      if (!match) return null;
      segments.add(match[1]!.toLowerCase());
    }
  }
  return segments;
}

/** The request's first path segment, lowercased; null when it holds anything else than ASCII (every router is tried). */
function firstSegmentOf(path: string): string | null {
  const end = path.indexOf('/', 1);
  const segment = path.slice(1, end === -1 ? undefined : end);
  return /^[\x00-\x7f]*$/.test(segment) ? segment.toLowerCase() : null;
}

/**
 * `router` entered only for the paths `paths` matches (routing is case-insensitive and not strict, so the
 * pattern must be too): the health and document routers sit in front of every API request, and walking their
 * routes to find none cost each request a router's turn.
 */
export function onlyForPaths(paths: RegExp, router: RequestHandler): RequestHandler {
  return (req, res, next) => {
    if (paths.test(req.path)) router(req, res, next);
    else next();
  };
}
