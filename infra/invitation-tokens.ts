import { jwtVerify, SignJWT } from 'jose';

const AUDIENCE = 'team-invitation';

/**
 * The token in an invitation link: a JWT (HS256) naming the invitation and its organisation, signed with
 * the user-token key (its own audience keeps the two kinds apart). It carries no expiry of its own: the
 * invitation decides (7 days, then 410), and accepting it once makes it used (409).
 */
export async function signInvitationToken(key: Uint8Array, claims: { invitationId: string; organisationId: string }): Promise<string> {
  return new SignJWT({ org: claims.organisationId })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(claims.invitationId)
    .setAudience(AUDIENCE)
    .setIssuedAt()
    .sign(key);
}

/** The invitation a token names, or null when the token is malformed, forged or signed with another key. */
export async function verifyInvitationToken(key: Uint8Array, token: string): Promise<{ invitationId: string; organisationId: string } | null> {
  try {
    const { payload } = await jwtVerify(token, key, { audience: AUDIENCE, algorithms: ['HS256'] });
    if (typeof payload.sub !== 'string' || typeof payload.org !== 'string') return null;
    return { invitationId: payload.sub, organisationId: payload.org };
  } catch {
    return null;
  }
}
