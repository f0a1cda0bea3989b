import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Config } from './config.ts';
import { userTokenKey } from './user-tokens.ts';

/**
 * Custom event link tokens: `<linkId>.<signature>`, the signature an HMAC-SHA256 over the link id and its
 * expiry. The key is derived from the user-token secret (`USER_TOKEN_SECRET` or the one kept in
 * `DATA_DIR`), under its own label, so one secret serves both without a link signature ever being valid
 * as anything else.
 */
const LABEL = 'engage:custom-event-link';
const TOKEN = /^([0-9a-f]{24})\.([A-Za-z0-9_-]{43})$/;

export function linkSigningKey(config: Pick<Config, 'userTokenSecret' | 'dataDir'>): Buffer {
  return createHmac('sha256', userTokenKey(config)).update(LABEL).digest();
}

function signature(key: Buffer, linkId: string, expiresAt: string): Buffer {
  return createHmac('sha256', key)
    .update(`${linkId}\n${new Date(expiresAt).toISOString()}`)
    .digest();
}

export function linkToken(key: Buffer, linkId: string, expiresAt: string): string {
  return `${linkId}.${signature(key, linkId, expiresAt).toString('base64url')}`;
}

/** The link id a token names, or null when it is not shaped like a link token. */
export function linkIdOf(token: string): string | null {
  return TOKEN.exec(token)?.[1] ?? null;
}

/** True when the token is the signed token of this link with this expiry. */
export function verifyLinkToken(key: Buffer, token: string, linkId: string, expiresAt: string): boolean {
  const match = TOKEN.exec(token);
  if (!match || match[1] !== linkId) return false;
  const given = Buffer.from(match[2]!, 'base64url');
  const expected = signature(key, linkId, expiresAt);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
