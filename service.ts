import type { Express } from 'express';
import { type Kysely, type Migration } from 'kysely';
import { communityCommands } from './command-api/communities.ts';
import { domainCommands } from './command-api/domains.ts';
import { leaderboardCommands } from './command-api/leaderboards.ts';
import { settingsCommands } from './command-api/settings.ts';
import { teamCommands } from './command-api/teams.ts';
import { challengeCommands } from './command-api/challenges.ts';
import { gameCommands } from './command-api/games.ts';
import { rewardCommands } from './command-api/rewards.ts';
import { userCommands } from './command-api/users.ts';
import { customEventCommands, tokenCheckedByAppend } from './command-api/custom-events.ts';
import { customEventLinkCommands, customEventLinkRedemption } from './command-api/custom-event-links.ts';
import { variableConfigCommands } from './command-api/variable-configs.ts';
import { ApiTokens, proveTokenBeforeErrors, requireApiToken } from './infra/auth.ts';
import type { Config } from './infra/config.ts';
import {
  holdBackgroundWork,
  inBackground,
  openPostgres,
  startedWithoutBackgroundWork,
  waitForPostgres,
  withTableTypes,
  type Database,
} from './infra/database.ts';
import { openEmbeddedPostgres, type EmbeddedPostgres } from './infra/embedded-postgres.ts';
import type { EventStore } from './infra/event-store/port.ts';
import { PostgresEventStore, eventStoreMigrations } from './infra/event-store/postgres.ts';
import { ApiDescription, DOCUMENT_PATHS } from './api/api-description.ts';
import { errorHandler, unknownRoute } from './infra/http/errors.ts';
import { createHttpApp } from './infra/http/plumbing.ts';
import { dispatchByFirstSegment, onlyForPaths } from './infra/http/route-dispatch.ts';
import type { RateLimits } from './infra/http/rate-limits.ts';
import type { Logger } from './infra/logging.ts';
import { projections } from './projectors/index.ts';
import { ProjectionRunner, prepareProjections, projectionRuntimeMigrations, type RuntimeOptions } from './projectors/runtime/index.ts';
import { communityQueries } from './query-api/communities.ts';
import { HEALTH_PATHS, healthRoutes, operationsApp } from './query-api/health.ts';
import { countingAppends, createMetrics, type Metrics } from './infra/metrics.ts';
import { scopedMigrator } from './infra/migrator.ts';
import { underStartupLock } from './infra/startup-lock.ts';
import { tracedAppends } from './infra/tracing.ts';
import { leaderboardQueries } from './query-api/leaderboards.ts';
import { organisationQueries } from './query-api/settings.ts';
import { challengeQueries } from './query-api/challenges.ts';
import { gameQueries } from './query-api/games.ts';
import { templateQueries } from './query-api/templates.ts';
import { meQueries } from './query-api/me.ts';
import { teamQueries } from './query-api/teams.ts';
import { userQueries } from './query-api/users.ts';
import { rewardQueries } from './query-api/rewards.ts';
import { standingsQueries } from './query-api/leaderboard-standings.ts';
import { giveawayAnalyticsQueries } from './query-api/giveaway-analytics.ts';
import { challengeStepAnalyticsQueries } from './query-api/challenge-step-analytics.ts';
import { rewardEntryQueries } from './query-api/reward-entries.ts';
import { rewardAssetCommands } from './command-api/reward-assets.ts';
import { eventQueries } from './query-api/events.ts';
import { achievementQueries } from './query-api/achievements.ts';
import { webhookCommands } from './command-api/webhooks.ts';
import { webhookQueries } from './query-api/webhooks.ts';
import { bullmqJobRunner, inProcessJobRunner, jobMigrations, type JobRunner, type JobRunnerOptions } from './infra/jobs.ts';
import { jobHandlers, type OutsideWorld } from './command-api/jobs.ts';
import type { Redis } from 'ioredis';
import { systemClock, type Clock } from './infra/clock.ts';
import type { CommandContext, CommandReads, ReadModel } from './command-api/read-port.ts';
import { readSettings } from './query-api/settings.ts';
import { rankedStandings } from './query-api/leaderboard-standings.ts';
import { STANDINGS_PROJECTION } from './projectors/leaderboard-standings.ts';
import { waitForProjections } from './projectors/runtime/index.ts';
import { ENGINE_PROCESS, readEntriesForDraw } from './process-managers/engagement-engine/index.ts';

/** What a process of the service holds, whether or not it serves HTTP. */
export interface ServiceCore extends CommandContext {
  runner: ProjectionRunner;
  jobs: JobRunner;
  /** The PostgreSQL server this process started or joined in embedded mode (no DATABASE_URL); null in server mode. */
  embedded: EmbeddedPostgres | null;
  /** This instance's Prometheus registry and metrics (served at `/metrics`). */
  metrics: Metrics;
  close(): Promise<void>;
}

export interface Service extends ServiceCore {
  app: Express;
}

export interface ServiceOptions {
  /** Run the projectors in this process (the all-in-one default). */
  projectors?: boolean;
  runtime?: RuntimeOptions;
  /** Run due jobs in this process (the all-in-one default). */
  jobs?: boolean;
  jobOptions?: JobRunnerOptions;
  /** The DNS resolver and mail transport the job handlers use (tests inject their own). */
  outside?: OutsideWorld;
  /** The time every command, decision and job uses (tests move their own). */
  clock?: Clock;
  /**
   * `api` (default): the whole HTTP API; `ops`: only /healthz, /readyz and /metrics (projector and worker roles);
   * `none`: no HTTP app and no rate limiter (the CLI), and no Redis either unless its jobs run here: an operator's
   * command reads PostgreSQL only, so it works while Redis is down, and loads neither ioredis nor the limiter.
   */
  http?: 'api' | 'ops' | 'none';
  /**
   * Wait for PostgreSQL and Redis to answer, with backoff and a log line per attempt, instead of failing
   * at once (the server process does; the CLI and tests would rather fail).
   */
  waitForStores?: boolean;
}

/** Opens the stores, applies migrations, prepares the read models and composes the HTTP app (unless `http: 'none'`). */
export async function openService(config: Config, logger: Logger, options: ServiceOptions & { http: 'none' }): Promise<ServiceCore>;
export async function openService(config: Config, logger: Logger, options?: ServiceOptions & { http?: 'api' | 'ops' }): Promise<Service>;
export async function openService(config: Config, logger: Logger, options: ServiceOptions = {}): Promise<ServiceCore | Service> {
  if (config.databaseUrl && options.waitForStores) await waitForPostgres(config.databaseUrl, logger, config.databaseTimeouts.connectMs);
  // Embedded mode: a PostgreSQL server of DATA_DIR's own, started here or joined, reached through its Unix
  // socket (over TCP when it has none this process can use); from then on the same pool as in server mode.
  const embedded = config.databaseUrl ? null : await openEmbeddedPostgres(config.dataDir, { logger });
  // A failed start stops the embedded server it started (unless another process uses it too).
  const database = await openPostgres(config.databaseUrl ?? embedded!.localUrl, {
    max: config.databasePoolSize,
    preparedStatements: config.databasePreparedStatements,
    applicationName: config.applicationName,
    timeouts: config.databaseTimeouts,
  }).catch(async (error: unknown) => {
    await embedded?.release();
    throw error;
  });
  let redis: Redis | null = null;
  let redisProbe: Redis | null = null;
  const releaseBackgroundWork = (options.projectors ?? true) || (options.jobs ?? true) ? holdBackgroundWork() : () => undefined;
  try {
    // Without waitForStores, one attempt: the wait gives up on the first failure that is not "unreachable". The
    // client (ioredis) is loaded only by a process that uses Redis: its queue's jobs, its rate limits.
    if (config.redisUrl && ((options.jobs ?? true) || options.http !== 'none')) {
      const { openRedis, openRedisProbe } = await import('./infra/redis.ts');
      redis = await openRedis(config.redisUrl, logger, { connectMs: config.redisConnectTimeoutMs, wait: options.waitForStores ?? false });
      // The readiness check's own connection, for the HTTP app's /readyz alone.
      if (options.http !== 'none') redisProbe = openRedisProbe(redis, config.readyCheckTimeoutMs);
    }
    const metrics = createMetrics();
    database.observeStatements((purpose) => metrics.databaseStatements.inc({ purpose }));
    // Migrations and new generations may build indexes over large tables: background limits.
    const store = tracedAppends(
      countingAppends(
        await inBackground(() =>
          underStartupLock(database, async () => {
            await migrate(database.db);
            const opened = await openEventStore(config, database);
            await prepareProjections(database.db, projections);
            return opened;
          }),
        ),
        metrics,
      ),
    );
    const clock = options.clock ?? systemClock;
    const ctx: CommandContext = { config, database, store, logger, clock, reads: commandReads(database.db, config) };
    // Batches take at most half the pool, so the API keeps connections whatever the projections do.
    // A process serving the API tells its live projections how many requests wait (see LivePacing).
    const runner = new ProjectionRunner(database, store, projections, logger, {
      concurrency: Math.max(1, Math.floor(config.databasePoolSize / 2)),
      ...(options.http === 'ops' ? {} : { requestsInFlight: () => metrics.requestsInFlight.meanSinceLastSample() }),
      ...options.runtime,
    });
    if (options.projectors ?? true) await runner.start();
    const jobOptions = { queueName: `engage-jobs-${databaseName(config)}`, now: () => clock.now(), ...options.jobOptions };
    const jobs = redis
      ? bullmqJobRunner(database.db, redis, jobHandlers(ctx, options.outside), logger, jobOptions)
      : inProcessJobRunner(database.db, jobHandlers(ctx, options.outside), logger, jobOptions);
    // Jobs run in the background: their loops and timers, started here, keep the background limits.
    if (options.jobs ?? true) await inBackground(() => jobs.start());
    // The API roles: nothing of theirs runs in the background from here on.
    startedWithoutBackgroundWork();
    const rateLimits = (options.http ?? 'api') === 'api' ? await openRateLimits(config, logger) : null;
    const core: ServiceCore = {
      ...ctx,
      runner,
      jobs,
      embedded,
      metrics,
      async close() {
        await jobs.stop();
        await runner.stop();
        await store.close();
        await database.close();
        redisProbe?.disconnect();
        redis?.disconnect();
        rateLimits?.close();
        await embedded?.release();
        releaseBackgroundWork();
      },
    };
    if (options.http === 'none') return core;
    return { ...core, app: rateLimits ? composeApp(ctx, redisProbe, metrics, rateLimits) : operationsApp(ctx, redisProbe, metrics) };
  } catch (error) {
    releaseBackgroundWork();
    redisProbe?.disconnect();
    redis?.disconnect();
    await database.close();
    await embedded?.release();
    throw error;
  }
}

/** The API's rate limiter (rate-limiter-flexible, on Redis when there is one): loaded by the API roles alone. */
async function openRateLimits(config: Config, logger: Logger): Promise<RateLimits> {
  const { RateLimits } = await import('./infra/http/rate-limits.ts');
  return RateLimits.open({ redisUrl: config.redisUrl, keyPrefix: `engage-rate-${databaseName(config)}`, defaults: config.rateLimits, logger });
}

/** Names the job queue after the database, so services on different databases can share one Redis. */
function databaseName(config: Config): string {
  return config.databaseUrl ? new URL(config.databaseUrl).pathname.slice(1) || 'postgres' : 'embedded';
}

/** PostgreSQL by default; the KurrentDB client (gRPC) is loaded only when it is chosen. */
async function openEventStore(config: Config, database: Database): Promise<EventStore> {
  if (config.eventStore === 'postgres') return new PostgresEventStore(database);
  const { KurrentDbEventStore } = await import('./infra/event-store/kurrentdb.ts');
  return KurrentDbEventStore.connect(config.kurrentDbConnectionString!);
}

/**
 * The event store's and the projector runtime's own tables; read models migrate per generation. Returns
 * the names of the migrations this call applied.
 */
export async function migrate(db: Kysely<any>): Promise<string[]> {
  return [
    ...(await runMigrations(db, eventStoreMigrations, 'es_migrations')),
    ...(await runMigrations(db, projectionRuntimeMigrations, 'projection_runtime_migrations')),
    ...(await runMigrations(db, jobMigrations, 'job_migrations')),
  ];
}

async function runMigrations(db: Kysely<any>, migrations: Record<string, Migration>, table: string): Promise<string[]> {
  const migrator = scopedMigrator({
    db,
    provider: { getMigrations: () => Promise.resolve(migrations) },
    migrationTableName: table,
    migrationLockTableName: `${table}_lock`,
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error('Migration failed', { cause: error });
  return (results ?? []).filter((result) => result.status === 'Success').map((result) => result.migrationName);
}

function composeApp(ctx: CommandContext, redis: Redis | null, metrics: Metrics, rateLimits: RateLimits): Express {
  const app = createHttpApp(ctx.logger, ctx.config.bodyLimit, metrics, ctx.config.logRequests);
  app.set('trust proxy', ctx.config.trustProxy);
  app.locals.clock = ctx.clock;
  app.locals.rateLimits = rateLimits;
  const { refuseBlockedAddresses, limitApiToken, checkAddressBeforeTokenRead } = rateLimits;
  // Tokens from a cache kept exact by the tenancy read model's announcements (infra/auth.ts); it listens on the
  // process's one LISTEN connection, which the service's close ends.
  const tokens = new ApiTokens(withTableTypes(ctx.database.db), ctx.database);
  app.use(onlyForPaths(HEALTH_PATHS, healthRoutes(ctx, redis, metrics)));
  const { admin, integration, analytics } = apiFamilies(ctx);
  for (const family of [admin, integration, analytics]) {
    const mount = `/api/v2/${family.description.family}`;
    app.use(
      mount,
      onlyForPaths(DOCUMENT_PATHS, family.description.router()),
      refuseBlockedAddresses,
      requireApiToken(tokens, family.description.family, checkAddressBeforeTokenRead, family === admin ? tokenCheckedByAppend : undefined),
      limitApiToken,
      dispatchByFirstSegment(family.routes),
    );
  }
  app.use(unknownRoute);
  app.use(proveTokenBeforeErrors);
  app.use(rateLimits.countFailedAuthentication);
  app.use(errorHandler);
  return app;
}

/**
 * The three API families: each one's routes, declared with the description that makes its OpenAPI
 * document. Declaring them touches no store, so the documents can be written without a running service
 * (`clients/typescript/generate.ts`).
 */
export function apiFamilies(ctx: CommandContext) {
  const admin = new ApiDescription('admin', 'engage admin API', 'Configure an organisation: leaderboards and everything a programme needs.');
  const adminRoutes = [
    domainCommands(ctx, admin),
    settingsCommands(ctx, admin),
    organisationQueries(ctx, admin),
    teamCommands(ctx, admin),
    leaderboardCommands(ctx, admin),
    leaderboardQueries(ctx, admin),
    rewardCommands(ctx, admin),
    rewardQueries(ctx, admin),
    communityCommands(ctx, admin),
    communityQueries(ctx, admin),
    variableConfigCommands(ctx, admin),
    userCommands(ctx, admin),
    customEventCommands(ctx, admin),
    customEventLinkCommands(ctx, admin),
    userQueries(ctx, admin),
    teamQueries(ctx, admin),
    challengeCommands(ctx, admin),
    challengeQueries(ctx, admin),
    templateQueries(ctx, admin),
    gameCommands(ctx, admin),
    gameQueries(ctx, admin),
    webhookCommands(ctx, admin),
    webhookQueries(ctx, admin),
  ];
  const integration = new ApiDescription('integration', 'engage integration API', 'What end users see: their own records, signed in with a user token.');
  const integrationRoutes = [
    meQueries(ctx, integration),
    customEventLinkRedemption(ctx, integration),
    standingsQueries(ctx, integration),
    rewardEntryQueries(ctx, integration),
    rewardAssetCommands(ctx, integration),
    eventQueries(ctx, integration),
    achievementQueries(ctx, integration),
  ];
  const analytics = new ApiDescription('analytics', 'engage analytics API', 'Statistics for dashboards: giveaways and the step funnel of challenges.');
  const analyticsRoutes = [giveawayAnalyticsQueries(ctx, analytics), challengeStepAnalyticsQueries(ctx, analytics)];
  return {
    admin: { description: admin, routes: adminRoutes },
    integration: { description: integration, routes: integrationRoutes },
    analytics: { description: analytics, routes: analyticsRoutes },
  };
}

export type { Database };

/** The projection behind each read model a command may wait for. */
const PROJECTION_OF: Record<ReadModel, string> = { tenancy: 'organisations', 'engagement-engine': ENGINE_PROCESS, standings: STANDINGS_PROJECTION };

/** The command side's read port, answered by the read side (projection checkpoints, the settings, the standings, the engine's entries). */
export function commandReads(db: Database['db'], config: Config): CommandReads {
  return {
    caughtUp: (readModels, position, timeoutMs) =>
      waitForProjections(
        db,
        readModels.map((readModel) => PROJECTION_OF[readModel]),
        position,
        timeoutMs,
      ),
    settings: (organisationId) => readSettings(withTableTypes(db), organisationId, config.rateLimits),
    rankedStandings: (leaderboardId, windowStart) => rankedStandings(withTableTypes(db), leaderboardId, windowStart),
    entriesForDraw: (rewardId) => readEntriesForDraw(db, rewardId),
  };
}
