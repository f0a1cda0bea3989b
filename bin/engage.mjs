#!/usr/bin/env node
// The `engage` command (`npx engage ...`), compiled (bin/build.mjs builds it when needed).
import { ensureBuilt } from './build.mjs';

await ensureBuilt();
process.setSourceMapsEnabled(true);
await import('../dist/cli/engage.js');
