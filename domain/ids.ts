import { createHash } from 'node:crypto';

/** A UUID derived from a name, so a retried command appends the same event ids (and so nothing new). */
export function uuidFrom(name: string): string {
  const hex = createHash('sha256').update(name).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-5${hex.slice(13, 16)}-${((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16)}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/** A 24-hex id derived from a name: what a job or the engine creates gets the same id when it runs again. */
export function idFrom(name: string): string {
  return createHash('sha256').update(name).digest('hex').slice(0, 24);
}

export const ID_PATTERN = /^[0-9a-fA-F]{24}$/;
