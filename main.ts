import type { Server } from 'node:http';
import { setFlagsFromString } from 'node:v8';
import type { Config } from './infra/config.ts';
import { planFor, roleArgument } from './infra/roles.ts';
import { TracingConfigError, startTracing, stopTracing } from './infra/tracing.ts';

/**
 * V8 sizes its old generation from what survived the last full collection times a growing factor, which
 * on a machine with 1 GB or more for the heap may reach 4: with about 50 MB alive under load, the service
 * let garbage pile up to 200 to 280 MB of heap before collecting it, 350 to 500 MB resident. A factor of
 * 1.5 (HEAP_GROWING_PERCENT=50) keeps it near 170 MB for a little more time in full collections (a few
 * hundred ms per 30 s of load, against the young generation's seconds). No bound on the heap's size: a
 * load that needs more gets it instead of running out of memory. A `--heap-growing-percent` given to node
 * wins; unknown to a future V8, the flag is ignored.
 */
function boundHeapGrowth(percent: number): void {
  if (percent <= 0 || process.execArgv.some((flag) => /^--heap[-_]growing[-_]percent/.test(flag))) return;
  setFlagsFromString(`--heap-growing-percent=${percent}`);
}

async function main(): Promise<void> {
  // `--role=<role>` (the npm start:* scripts) wins over ROLE in the environment.
  const role = roleArgument(process.argv.slice(2));
  // Tracing first: its instrumentations patch http, express, pg and ioredis as they load, so everything that
  // imports them is imported below, after it (statically imported, they would load before this line runs).
  try {
    const named = role ?? process.env.ROLE ?? 'all';
    await startTracing({ serviceName: named === 'all' ? 'engage' : `engage-${named}` });
  } catch (error) {
    if (error instanceof TracingConfigError) {
      console.error(`Invalid configuration:\n  - ${error.message}`);
      process.exit(1);
    }
    throw error;
  }
  const [{ ConfigError, loadConfig }, { createLogger }, { openService }, { createHttpServer }] = await Promise.all([
    import('./infra/config.ts'),
    import('./infra/logging.ts'),
    import('./service.ts'),
    import('./infra/http/plumbing.ts'),
  ]);
  let config: Config;
  try {
    config = loadConfig(role === undefined ? process.env : { ...process.env, ROLE: role });
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      process.exit(1);
    }
    throw error;
  }
  boundHeapGrowth(config.heapGrowingPercent);
  const logger = createLogger(config.logLevel).child({ role: config.role });
  // A signal during the start: in embedded mode the start finishes first, then stops what it started (the
  // embedded PostgreSQL); in server mode there is nothing of ours to stop, and a process waiting for its
  // stores ends at once.
  let stopRequested: string | null = null;
  const duringStart = (signal: NodeJS.Signals) => {
    if (config.databaseUrl) process.exit(signal === 'SIGINT' ? 130 : 143);
    stopRequested ??= signal;
    logger.info({ signal }, 'stopping once the start has finished');
  };
  process.on('SIGINT', duringStart);
  process.on('SIGTERM', duringStart);
  // A process started before its stores waits for them (a log line per attempt) instead of exiting.
  const service = await openService(config, logger, { ...planFor(config.role), waitForStores: true });
  let server: Server;
  try {
    if (stopRequested) throw new StartAbandoned(stopRequested);
    server = createHttpServer(service.app).listen(config.port, config.host);
    await new Promise<void>((resolve, reject) => server.once('listening', resolve).once('error', reject));
  } catch (error) {
    await service.close();
    await stopTracing();
    if (error instanceof StartAbandoned) {
      logger.info({ signal: error.message }, 'stopped');
      process.exit(0);
    }
    throw error;
  }
  process.off('SIGINT', duringStart);
  process.off('SIGTERM', duringStart);
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const mode = service.embedded ? `embedded (PostgreSQL on 127.0.0.1:${service.embedded.port}, data in ${config.dataDir})` : 'server (PostgreSQL)';
  logger.info(
    { port, mode, platformDomain: config.platformDomain, ...(service.embedded?.socketDir ? { postgresSocket: service.embedded.socketDir } : {}) },
    `engage listening on http://localhost:${port}; organisations answer on http://<slug>.${config.platformDomain}:${port}`,
  );

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down: no new connections, finishing requests in flight');
    const forced = setTimeout(() => {
      logger.error('shutdown took too long; exiting');
      // Requests or batches that do not finish must not leave the embedded PostgreSQL running without a
      // user: it is left as a normal stop leaves it (stopped when this process was its last user), bounded.
      // Its stop ends the sessions still in use, whose errors may surface with nobody to hear them: on the
      // way out they are logged, not a crash that would cut the stop short.
      process.on('uncaughtException', (error) => logger.warn({ err: error }, 'while exiting'));
      const released = service.embedded?.release().catch((error: unknown) => logger.error({ err: error }, 'the embedded PostgreSQL could not be stopped'));
      void Promise.race([released, new Promise((resolve) => setTimeout(resolve, FORCED_RELEASE_MS))]).finally(() => process.exit(1));
    }, config.shutdownTimeoutMs);
    forced.unref();
    server.close();
    server.closeIdleConnections();
    await new Promise<void>((resolve) => server.once('close', () => resolve()));
    // Stops the embedded PostgreSQL too, unless an `engage` command still uses it (then the last one out does).
    await service.close();
    await stopTracing();
    logger.info('stopped');
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}

/** How long a forced exit waits for the embedded PostgreSQL to stop (a fast shutdown takes well under a second). */
const FORCED_RELEASE_MS = 10_000;

class StartAbandoned extends Error {}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
