#!/usr/bin/env -S node --max-old-space-size=400 --max-semi-space-size=32
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
 * Its young generation may grow to 32 MB semi-spaces (node's default for this heap is 16): a page of the log
 * lives until every read model has taken it, so the default scavenges copied most of it once or twice before
 * promoting it. The 1M-event rebuild, A/B twice on one machine: 59.6/53.7 s → 49.4/44.5 s, Node's CPU −20 to
 * −25%; peak RSS 253–258 MB → 289–292 MB (16 MB: no change).
 */
const SEMI_SPACE_FLAG = '--max-semi-space-size=32';
const HEAP_MB = Number(process.env.ENGAGE_REBUILD_HEAP_MB ?? 400);
const args = process.argv.slice(2);
const isRebuild = args[0] === 'projections' && args[1] === 'rebuild';
/** Whether node's command line or NODE_OPTIONS already names this flag (then it wins). */
const given = (name) => [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)].some((flag) => flag.startsWith(name));
const heapGiven = given('--max-old-space-size');

if (isRebuild && HEAP_MB > 0 && !heapGiven) {
  // Its own process group: a Ctrl-C reaches it once, through here, as a signal sent to this launcher does.
  const flags = [...process.execArgv, `--max-old-space-size=${HEAP_MB}`, ...(given('--max-semi-space-size') ? [] : [SEMI_SPACE_FLAG])];
  const child = spawn(process.execPath, [...flags, fileURLToPath(import.meta.url), ...args], {
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
