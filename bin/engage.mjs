#!/usr/bin/env -S node --max-old-space-size=400 --single-threaded-gc
// The `engage` command (`npx engage ...`), compiled (bin/build.mjs builds it when needed).
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ensureBuilt } from './build.mjs';

await ensureBuilt();

/**
 * `projections rebuild` folds the whole log: V8's old generation is bounded (400 MB, the shebang's flag, so
 * `npx engage` runs in one process), so V8 collects as it goes instead of growing the process to 600 MB of
 * garbage, while leaving the collector room enough not to eat the rebuild's time (a 160 MB bound spent a
 * quarter of the process in the collector). What a rebuild keeps is bounded by the shared log's cache and
 * the building window. Run as `node bin/engage.mjs` (no heap flag), a rebuild starts itself again in a
 * node with the bound: ENGAGE_REBUILD_HEAP_MB sets it (0: none); a heap size given in NODE_OPTIONS or on
 * node's command line wins. Signals reach that rebuild through this launcher, which ends with its exit code.
 *
 * Its young generation keeps node's default (16 MB semi-spaces). 32 MB ones saved Node 20-25% of its CPU on a
 * slower machine, but 4% on a faster one, and raised the peak resident set from about 255 MB to 288-300 MB,
 * at the 300 MB that a rebuild may hold (the 1M-event bench, 2026-11-27, twice each way): not worth it.
 *
 * Its collector runs on the main thread (`--single-threaded-gc`, the shebang's and the restart's): V8's helper
 * threads mark and sweep concurrently, which spares an API its pauses but costs CPU of their own, on a
 * machine that a rebuild (Node and PostgreSQL) already keeps busy. The 1M-event rebuild used 9.5% less of
 * Node's CPU with it (33.6 s against 37.1 s, the mean of 6 and 7 runs interleaved, 2026-11-28), about 4% less
 * wall time, and 5 MB more at its peak. A command is a batch: nobody waits on its pauses.
 */
const HEAP_MB = Number(process.env.ENGAGE_REBUILD_HEAP_MB ?? 400);
const args = process.argv.slice(2);
const isRebuild = args[0] === 'projections' && args[1] === 'rebuild';
const givenFlags = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)];
const heapGiven = givenFlags.some((flag) => flag.startsWith('--max-old-space-size'));
const collectorFlags = givenFlags.includes('--single-threaded-gc') ? [] : ['--single-threaded-gc'];

if (isRebuild && HEAP_MB > 0 && !heapGiven) {
  // Its own process group: a Ctrl-C reaches it once, through here, as a signal sent to this launcher does.
  const child = spawn(process.execPath, [...process.execArgv, `--max-old-space-size=${HEAP_MB}`, ...collectorFlags, fileURLToPath(import.meta.url), ...args], {
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
