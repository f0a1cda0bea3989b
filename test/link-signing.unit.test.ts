import { describe, expect, it } from 'vitest';
import { linkIdOf, linkSigningKey, linkToken, verifyLinkToken } from '../infra/link-signing.ts';

const key = linkSigningKey({ userTokenSecret: 's'.repeat(40), dataDir: '/nonexistent' });
const linkId = '0123456789abcdef01234567';
const expiresAt = '2026-03-01T13:00:00.000Z';

describe('link tokens', () => {
  it('are the link id and a signature over it and the expiry, which verifies', () => {
    const token = linkToken(key, linkId, expiresAt);
    expect(token).toMatch(/^0123456789abcdef01234567\.[A-Za-z0-9_-]{43}$/);
    expect(linkIdOf(token)).toBe(linkId);
    expect(verifyLinkToken(key, token, linkId, expiresAt)).toBe(true);
  });

  it('do not verify with another expiry, another link, another key, or a changed signature', () => {
    const token = linkToken(key, linkId, expiresAt);
    expect(verifyLinkToken(key, token, linkId, '2026-03-01T13:00:01.000Z')).toBe(false);
    expect(verifyLinkToken(key, token, 'f'.repeat(24), expiresAt)).toBe(false);
    expect(verifyLinkToken(linkSigningKey({ userTokenSecret: 't'.repeat(40), dataDir: '/nonexistent' }), token, linkId, expiresAt)).toBe(false);
    // Change a character mid-signature (the last one carries padding bits that may not change the bytes).
    const at = token.indexOf('.') + 10;
    const changed = token.slice(0, at) + (token[at] === 'A' ? 'B' : 'A') + token.slice(at + 1);
    expect(verifyLinkToken(key, changed, linkId, expiresAt)).toBe(false);
  });

  it('anything not shaped like a token names no link', () => {
    for (const token of ['', 'abc', `${linkId}`, `${linkId}.short`, `${linkId.toUpperCase()}.${'A'.repeat(43)}`, `${linkId}.${'A'.repeat(43)}.x`]) {
      expect(linkIdOf(token)).toBeNull();
    }
  });
});
