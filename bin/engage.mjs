#!/usr/bin/env -S node --max-old-space-size=200 --heap-growing-percent=100 --single-threaded-gc
// The `engage` command (`npx engage ...`), compiled (bin/build.mjs builds it when needed).
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ensureBuilt } from './build.mjs';

await ensureBuilt();

/**
 * `projections rebuild` folds the whole log: V8's old generation is bounded (200 MB, the shebang's flag, so
 * `npx engage` runs in one process), and may grow to twice what survived its last full collection before the
 * next (`--heap-growing-percent=100`). A rebuild promotes nearly every event it reads (a page lives until the
 * slowest read model has passed it), about a gigabyte on the bench's 1M-event store, which dies in the old
 * generation while what it keeps stays about 60 MB (the shared log's cache and the building window). V8's own
 * growing left it about 40 MB of room: 42-43 full collections, each marking and sweeping on the main thread.
 * Twice the live size, within the bound: 27, and 2.3-3.1 s less of Node's CPU (0.304-0.315x the keyset read
 * against 0.280-0.293, five and four runs interleaved, 2026-12-07), at 266-270 MB resident against 256-268.
 * The growing alone under the earlier 400 MB bound reached 303-327 MB (the 300 MB a rebuild may hold); a
 * 160 MB bound brought back the collections (41). Run as `node bin/engage.mjs` (no heap flag), a rebuild
 * starts itself again in a node with those flags: ENGAGE_REBUILD_HEAP_MB sets the bound (0: none, nor the
 * growing); a heap size given in NODE_OPTIONS or on node's command line wins. Signals reach that rebuild
 * through this launcher, which ends with its exit code.
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
const HEAP_MB = Number(process.env.ENGAGE_REBUILD_HEAP_MB ?? 200);
const args = process.argv.slice(2);
const isRebuild = args[0] === 'projections' && args[1] === 'rebuild';
const givenFlags = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)];
const heapGiven = givenFlags.some((flag) => flag.startsWith('--max-old-space-size'));
const collectorFlags = [
  ...(givenFlags.includes('--single-threaded-gc') ? [] : ['--single-threaded-gc']),
  ...(givenFlags.some((flag) => flag.startsWith('--heap-growing-percent')) ? [] : ['--heap-growing-percent=100']),
];

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
