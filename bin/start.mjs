#!/usr/bin/env node
// `npm start` (and the start:<role> scripts): the service, compiled (bin/build.mjs builds it when needed).
import { ensureBuilt } from './build.mjs';

await ensureBuilt();
process.setSourceMapsEnabled(true);
await import('../dist/main.js');
