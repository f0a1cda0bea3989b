import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dataFolderOf, readPostmaster } from '../../infra/embedded-postgres.ts';

/** Temporary data directories of one test file, removed together at its end. */
export function temporaryDirectories(prefix: string) {
  const made: string[] = [];
  return {
    made,
    make(): string {
      const dir = mkdtempSync(join(tmpdir(), prefix));
      made.push(dir);
      return dir;
    },
    removeAll(): void {
      for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Alive and not a zombie: a server whose starter died is reaped by whoever adopted it, maybe late. */
export function isRunning(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** The pid of the embedded PostgreSQL running for this data directory, if one is. */
export function runningPostmaster(dataDir: string): number | null {
  const pid = readPostmaster(dataFolderOf(dataDir))?.pid;
  return pid && isRunning(pid) ? pid : null;
}
