import { randomFillSync } from 'node:crypto';

/** Random bytes for ids, drawn from the CSPRNG 4 KB at a time (one call for 512 ids instead of one each). */
const pool = Buffer.alloc(4096);
let used = pool.length;

/** A 24-hex id: 4 bytes of seconds since the epoch, then 8 random bytes (sortable by creation time). */
export function newId(now: Date = new Date()): string {
  const seconds = Math.floor(now.getTime() / 1000)
    .toString(16)
    .padStart(8, '0');
  if (used + 8 > pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  used += 8;
  return seconds + pool.toString('hex', used - 8, used);
}

// Ids derived from names are pure (the domain derives its own): they live in the domain, re-exported here.
export { ID_PATTERN, idFrom, uuidFrom } from '../domain/ids.ts';
