import { randomBytes } from 'node:crypto';
import { chmodSync, linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SignJWT, jwtVerify } from 'jose';
import type { Config } from './config.ts';

/**
 * User tokens identify an end user on the integration API (`Authorization: Bearer <token>`): short-lived
 * HS256 JWTs with `sub` = user id and `org` = organisation id, issued through the admin API. Nothing about
 * them is stored; they stop working when they expire.
 */
const AUDIENCE = 'engage:integration';
const SECRET_FILE = 'user-token-secret';

const secrets = new Map<string, Uint8Array>();

/**
 * The signing key: `USER_TOKEN_SECRET`, or else a secret generated at first start and kept in
 * `DATA_DIR/user-token-secret` (mode 0600), so tokens survive restarts.
 */
export function userTokenKey(config: Pick<Config, 'userTokenSecret' | 'dataDir'>): Uint8Array {
  const cacheKey = config.userTokenSecret !== undefined ? `env:${config.userTokenSecret}` : `file:${config.dataDir}`;
  let key = secrets.get(cacheKey);
  if (!key) {
    key = new TextEncoder().encode(config.userTokenSecret ?? secretFromFile(config.dataDir));
    secrets.set(cacheKey, key);
  }
  return key;
}

function secretFromFile(dataDir: string): string {
  const path = join(dataDir, SECRET_FILE);
  const existing = readSecret(path);
  if (existing !== null) return existing;
  mkdirSync(dataDir, { recursive: true });
  // Written whole under a temporary name, then linked into place: link fails if another process got there
  // first, so every process ends up with the same, complete secret.
  const temporary = `${path}.${process.pid}.${randomBytes(4).toString('hex')}`;
  writeFileSync(temporary, `${randomBytes(48).toString('base64url')}\n`, { mode: 0o600 });
  chmodSync(temporary, 0o600);
  try {
    linkSync(temporary, path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    rmSync(temporary, { force: true });
  }
  const secret = readSecret(path);
  if (secret === null) throw new Error(`Could not read the user token secret in ${path}`);
  return secret;
}

function readSecret(path: string): string | null {
  let content: string;
  try {
    content = readFileSync(path, 'utf8').trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  if (content.length < 32) throw new Error(`${path} holds a user token secret shorter than 32 characters; remove it or set USER_TOKEN_SECRET`);
  return content;
}

export interface UserTokenClaims {
  userId: string;
  organisationId: string;
}

export async function issueUserToken(
  key: Uint8Array,
  claims: UserTokenClaims & { expiresInSeconds: number; now?: Date },
): Promise<{ token: string; expiresAt: string }> {
  const issuedAt = Math.floor((claims.now ?? new Date()).getTime() / 1000);
  const expiresAt = issuedAt + claims.expiresInSeconds;
  const token = await new SignJWT({ org: claims.organisationId })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(claims.userId)
    .setAudience(AUDIENCE)
    .setIssuedAt(issuedAt)
    .setExpirationTime(expiresAt)
    .sign(key);
  return { token, expiresAt: new Date(expiresAt * 1000).toISOString() };
}

/** The token's claims when its signature, audience and expiry check out; null otherwise. */
export async function verifyUserToken(key: Uint8Array, token: string, now?: Date): Promise<UserTokenClaims | null> {
  try {
    const { payload } = await jwtVerify(token, key, { algorithms: ['HS256'], audience: AUDIENCE, requiredClaims: ['sub', 'exp'], currentDate: now });
    if (typeof payload.sub !== 'string' || typeof payload.org !== 'string') return null;
    return { userId: payload.sub, organisationId: payload.org };
  } catch {
    return null;
  }
}
