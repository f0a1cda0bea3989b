import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * In embedded mode one process owns the PGlite files. It leaves this note in the data directory (mode
 * 0600: the secret is as good as local admin) so the CLI talks to it instead of opening the files twice.
 */
export interface ServerFile {
  pid: number;
  port: number;
  consoleSecret: string;
}

const fileOf = (dataDir: string) => join(dataDir, 'server.json');

export function writeServerFile(dataDir: string, server: ServerFile): void {
  writeFileSync(fileOf(dataDir), JSON.stringify(server), { mode: 0o600 });
}

export function removeServerFile(dataDir: string): void {
  rmSync(fileOf(dataDir), { force: true });
}

/** The running server that owns this data directory, if there is one. */
export function runningServer(dataDir: string): ServerFile | null {
  if (!existsSync(fileOf(dataDir))) return null;
  try {
    const server = JSON.parse(readFileSync(fileOf(dataDir), 'utf8')) as ServerFile;
    process.kill(server.pid, 0);
    return server;
  } catch {
    return null;
  }
}
