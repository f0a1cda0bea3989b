import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../infra/config.ts';
import { issueUserToken, userTokenKey, verifyUserToken } from '../infra/user-tokens.ts';

const directories: string[] = [];
const freshDirectory = () => {
  const directory = mkdtempSync(join(tmpdir(), 'engage-user-tokens-'));
  directories.push(directory);
  return directory;
};
afterEach(() => {
  for (const directory of directories.splice(0)) rmSync(directory, { recursive: true, force: true });
});

const key = new TextEncoder().encode('k'.repeat(32));
const claims = { userId: 'a'.repeat(24), organisationId: 'b'.repeat(24) };

describe('user tokens', () => {
  it('carry the user and the organisation, and expire after the given seconds', async () => {
    const now = new Date('2026-01-01T10:00:00.000Z');
    const issued = await issueUserToken(key, { ...claims, expiresInSeconds: 60, now });
    expect(issued.expiresAt).toBe('2026-01-01T10:01:00.000Z');
    expect(await verifyUserToken(key, issued.token, new Date('2026-01-01T10:00:59.000Z'))).toEqual(claims);
    expect(await verifyUserToken(key, issued.token, new Date('2026-01-01T10:01:01.000Z'))).toBeNull();
  });

  it('are refused under another key, or when tampered with', async () => {
    const { token } = await issueUserToken(key, { ...claims, expiresInSeconds: 3600 });
    expect(await verifyUserToken(new TextEncoder().encode('x'.repeat(32)), token)).toBeNull();
    const [header, , signature] = token.split('.');
    const forged = Buffer.from(JSON.stringify({ sub: claims.userId, org: 'c'.repeat(24), aud: 'engage:integration', exp: 4_000_000_000 })).toString(
      'base64url',
    );
    expect(await verifyUserToken(key, `${header}.${forged}.${signature}`)).toBeNull();
    expect(await verifyUserToken(key, 'not-a-token')).toBeNull();
  });
});

describe('the user token secret', () => {
  it('is USER_TOKEN_SECRET when set', () => {
    const dataDir = freshDirectory();
    const config = loadConfig({ DATA_DIR: dataDir, USER_TOKEN_SECRET: 's'.repeat(40) });
    expect(config.userTokenSecret).toBe('s'.repeat(40));
    expect(new TextDecoder().decode(userTokenKey(config))).toBe('s'.repeat(40));
  });

  it('must be at least 32 characters', () => {
    expect(() => loadConfig({ USER_TOKEN_SECRET: 'short' })).toThrow(ConfigError);
    expect(() => loadConfig({ USER_TOKEN_SECRET: 'short' })).toThrow(/USER_TOKEN_SECRET: must be at least 32 characters/);
    expect(loadConfig({ USER_TOKEN_SECRET: '' }).userTokenSecret).toBeUndefined();
  });

  it('is otherwise generated once into DATA_DIR/user-token-secret (mode 0600) and kept', () => {
    const dataDir = join(freshDirectory(), 'nested');
    const first = userTokenKey({ dataDir, userTokenSecret: undefined });
    const path = join(dataDir, 'user-token-secret');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(new TextDecoder().decode(first)).toBe(readFileSync(path, 'utf8').trim());
    expect(first.length).toBeGreaterThanOrEqual(32);
  });

  it('survives a restart: a file already there is used as it is', () => {
    const dataDir = freshDirectory();
    writeFileSync(join(dataDir, 'user-token-secret'), `${'p'.repeat(48)}\n`, { mode: 0o600 });
    expect(new TextDecoder().decode(userTokenKey({ dataDir, userTokenSecret: undefined }))).toBe('p'.repeat(48));
  });

  it('refuses a file holding a secret too short to sign with', () => {
    const dataDir = freshDirectory();
    writeFileSync(join(dataDir, 'user-token-secret'), 'short', { mode: 0o600 });
    expect(() => userTokenKey({ dataDir, userTokenSecret: undefined })).toThrow(/shorter than 32 characters/);
  });
});
