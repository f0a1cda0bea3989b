import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Where no PostgreSQL answers (and REQUIRE_SERVICES is not 1), the run starts an embedded one.
    globalSetup: ['test/support/global-setup.ts'],
    pool: 'forks',
    // One file at a time: the suites share one PostgreSQL server, and readers of the event store stop at
    // the oldest transaction running anywhere on it, so a suite that holds a transaction open on purpose
    // (the out-of-order commit test, a projector killed mid-batch) would stall another's read models.
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
  },
});
