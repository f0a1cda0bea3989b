import type { Server } from 'node:http';
import type { Config } from './infra/config.ts';
import { planFor, roleArgument } from './infra/roles.ts';
import { TracingConfigError, startTracing, stopTracing } from './infra/tracing.ts';

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
  const [{ ConfigError, loadConfig }, { createLogger }, { removeServerFile, runningServer, writeServerFile }, { openService }] = await Promise.all([
    import('./infra/config.ts'),
    import('./infra/logging.ts'),
    import('./infra/server-file.ts'),
    import('./service.ts'),
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
  const logger = createLogger(config.logLevel).child({ role: config.role });
  const embedded = !config.databaseUrl;
  if (embedded) {
    const other = runningServer(config.dataDir);
    if (other) {
      console.error(`Another engage server (pid ${other.pid}) already owns ${config.dataDir}; stop it or set DATA_DIR.`);
      process.exit(1);
    }
  }
  // A process started before its stores waits for them (a log line per attempt) instead of exiting.
  const service = await openService(config, logger, { ...planFor(config.role), waitForStores: true });
  const server: Server = service.app.listen(config.port, config.host);
  await new Promise<void>((resolve, reject) => server.once('listening', resolve).once('error', reject));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  if (embedded) writeServerFile(config.dataDir, { pid: process.pid, port, consoleSecret: service.consoleSecret });
  logger.info(
    { port, mode: embedded ? `embedded (PGlite in ${config.dataDir})` : 'server (PostgreSQL)', platformDomain: config.platformDomain },
    `engage listening on http://localhost:${port}; organisations answer on http://<slug>.${config.platformDomain}:${port}`,
  );

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down: no new connections, finishing requests in flight');
    const forced = setTimeout(() => {
      logger.error('shutdown took too long; exiting');
      process.exit(1);
    }, config.shutdownTimeoutMs);
    forced.unref();
    server.close();
    server.closeIdleConnections();
    await new Promise<void>((resolve) => server.once('close', () => resolve()));
    await service.close();
    if (embedded) removeServerFile(config.dataDir);
    await stopTracing();
    logger.info('stopped');
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
