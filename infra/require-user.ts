import type { RequestHandler, Response } from 'express';
import { tenantOf } from './auth.ts';
import { unauthorized } from './http/errors.ts';
import type { RateLimits } from './http/rate-limits.ts';
import { verifyUserToken, type UserTokenClaims } from './user-tokens.ts';

/**
 * Integration routes that act for an end user: after `requireApiToken`, `Authorization: Bearer <user token>`
 * must carry a valid, unexpired user token of the request's organisation; else 401 `UNAUTHORIZED`. The
 * request then counts against the user's rate limit (429 once it is spent).
 */
export function requireUser(key: Uint8Array): RequestHandler {
  return async (req, res, next) => {
    const header = req.get('authorization');
    const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!match) throw unauthorized('Missing Authorization: Bearer <user token> header');
    const claims = await verifyUserToken(key, match[1]!);
    if (!claims) throw unauthorized('Invalid or expired user token');
    if (claims.organisationId !== tenantOf(res).organisationId) throw unauthorized('This user token belongs to another organisation');
    res.locals.user = claims;
    // The composed app's limits (the type only: the limiter and its Redis client load with the API's app).
    await (req.app.locals.rateLimits as RateLimits | undefined)?.limitUser(res, claims);
    next();
  };
}

export function signedInUserOf(res: Response): UserTokenClaims {
  const user = res.locals.user as UserTokenClaims | undefined;
  if (!user) throw unauthorized();
  return user;
}
