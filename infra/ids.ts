import { randomBytes } from 'node:crypto';

/** A 24-hex id: 4 bytes of seconds since the epoch, then 8 random bytes (sortable by creation time). */
export function newId(now: Date = new Date()): string {
  const seconds = Math.floor(now.getTime() / 1000)
    .toString(16)
    .padStart(8, '0');
  return seconds + randomBytes(8).toString('hex');
}

// Ids derived from names are pure (the domain derives its own): they live in the domain, re-exported here.
export { ID_PATTERN, idFrom, uuidFrom } from '../domain/ids.ts';
