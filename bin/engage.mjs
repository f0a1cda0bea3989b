#!/usr/bin/env node
// The `engage` command (`npx engage ...`), compiled (bin/build.mjs builds it when needed).
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ensureBuilt } from './build.mjs';

await ensureBuilt();

/**
 * `projections rebuild` folds the whole log: it runs in a node of its own with a bounded heap, so V8 collects
 * as it goes instead of growing the process to half a gigabyte of garbage (the live set is bounded by the
 * shared log's cache and the building window). ENGAGE_REBUILD_HEAP_MB sets the bound (0: none); a heap size
 * given in NODE_OPTIONS or on node's command line wins. Signals reach the rebuild through this launcher, which
 * ends with its exit code.
 */
const HEAP_MB = Number(process.env.ENGAGE_REBUILD_HEAP_MB ?? 160);
const args = process.argv.slice(2);
const isRebuild = args[0] === 'projections' && args[1] === 'rebuild';
const heapGiven = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)].some((flag) => flag.startsWith('--max-old-space-size'));

if (isRebuild && HEAP_MB > 0 && !heapGiven) {
  // Its own process group: a Ctrl-C reaches it once, through here, as a signal sent to this launcher does.
  const child = spawn(process.execPath, [...process.execArgv, `--max-old-space-size=${HEAP_MB}`, fileURLToPath(import.meta.url), ...args], {
    stdio: 'inherit',
    detached: process.platform !== 'win32',
  });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
  child.on('error', (error) => {
    console.error(`engage: ${error.message}`);
    process.exit(1);
  });
  child.on('exit', (code, signal) => process.exit(code ?? (signal === 'SIGINT' ? 130 : 1)));
} else {
  process.setSourceMapsEnabled(true);
  await import('../dist/cli/engage.js');
}
