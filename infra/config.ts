import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { z } from 'zod';
import { DEFAULT_DATABASE_TIMEOUTS, type DatabaseTimeouts } from './database.ts';
import type { RequestLogging } from './http/plumbing.ts';
import { ROLES, type Role } from './roles.ts';

const optionalUrl = (protocols: string[]) =>
  z
    .string()
    .optional()
    .transform((value) => (value === '' ? undefined : value))
    .refine((value) => value === undefined || protocols.some((protocol) => value.startsWith(`${protocol}://`)), {
      message: `must be a URL starting with ${protocols.map((p) => `${p}://`).join(' or ')}`,
    });

const integer = (fallback: number, min: number, max: number) =>
  z
    .string()
    .optional()
    .transform((value) => (value === undefined || value === '' ? String(fallback) : value))
    .pipe(z.string().regex(/^\d+$/, 'must be a whole number'))
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

/** Express's `trust proxy` list: the proxies whose X-Forwarded-For names the client (per-address rate limits). */
const trustedProxies = z
  .string()
  .default('loopback')
  .transform((value) => value.split(',').map((entry) => entry.trim()))
  .refine((entries) => entries.every(isProxyEntry), { message: 'must be a comma-separated list of loopback, linklocal, uniquelocal, addresses or CIDR ranges' })
  .transform((entries) => entries.join(', '));

function isProxyEntry(entry: string): boolean {
  if (['loopback', 'linklocal', 'uniquelocal'].includes(entry)) return true;
  const [address = '', bits, ...rest] = entry.split('/');
  const version = isIP(address);
  return version !== 0 && rest.length === 0 && (bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= (version === 4 ? 32 : 128)));
}

export const environment = z.object({
  PORT: integer(3000, 0, 65535),
  HOST: z.string().default('0.0.0.0'),
  DATA_DIR: z.string().min(1).default('./.data'),
  DATABASE_URL: optionalUrl(['postgres', 'postgresql']),
  REDIS_URL: optionalUrl(['redis', 'rediss']),
  EVENT_STORE: z.enum(['postgres', 'kurrentdb']).default('postgres'),
  KURRENTDB_CONNECTION_STRING: optionalUrl(['kurrentdb', 'kurrentdb+discover', 'esdb', 'esdb+discover']),
  PLATFORM_DOMAIN: z
    .string()
    .default('localhost')
    .transform((value) => value.toLowerCase())
    .pipe(
      z
        .string()
        .regex(
          /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/,
          'must be a domain name such as localhost or engage.example.com',
        ),
    ),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  LOG_REQUESTS: z.enum(['info', 'debug', 'off']).default('info'),
  BODY_LIMIT: z
    .string()
    .regex(/^\d+(b|kb|mb)$/i, 'must be a size such as 100kb or 1mb')
    .default('1mb'),
  READ_YOUR_WRITES_TIMEOUT_MS: integer(5000, 0, 60_000),
  SHUTDOWN_TIMEOUT_MS: integer(10_000, 0, 300_000),
  // How far V8 lets its old generation grow past what survived the last full collection (main.ts says why).
  HEAP_GROWING_PERCENT: integer(50, 0, 1000),
  DATABASE_POOL_SIZE: integer(10, 1, 200),
  // Named statements per pool session (infra/database.ts, StatementNames); 0 for a pooler in transaction mode.
  DATABASE_PREPARED_STATEMENTS: integer(256, 0, 10_000),
  // How long the process waits on its stores (infra/database.ts says why there are two kinds of work).
  DATABASE_CONNECT_TIMEOUT_MS: integer(DEFAULT_DATABASE_TIMEOUTS.connectMs, 100, 60_000),
  DATABASE_STATEMENT_TIMEOUT_MS: integer(DEFAULT_DATABASE_TIMEOUTS.statementMs, 100, 600_000),
  DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS: integer(DEFAULT_DATABASE_TIMEOUTS.idleInTransactionMs, 100, 600_000),
  DATABASE_BACKGROUND_STATEMENT_TIMEOUT_MS: integer(DEFAULT_DATABASE_TIMEOUTS.backgroundStatementMs, 1000, 86_400_000),
  DATABASE_BACKGROUND_IDLE_IN_TRANSACTION_TIMEOUT_MS: integer(DEFAULT_DATABASE_TIMEOUTS.backgroundIdleInTransactionMs, 1000, 86_400_000),
  REDIS_CONNECT_TIMEOUT_MS: integer(1000, 100, 60_000),
  READY_CHECK_TIMEOUT_MS: integer(1000, 100, 60_000),
  // Names this process's connections in pg_stat_activity (its LISTEN and control sessions add `:listen` and `:control`).
  APPLICATION_NAME: z
    .string()
    .optional()
    .transform((value) => (value === '' ? undefined : value))
    .refine((value) => value === undefined || /^[A-Za-z0-9_.-]{1,48}$/.test(value), {
      message: 'must be 1 to 48 letters, digits, dots, dashes or underscores',
    }),
  USER_TOKEN_SECRET: z
    .string()
    .optional()
    .transform((value) => (value === '' ? undefined : value))
    .refine((value) => value === undefined || value.length >= 32, { message: 'must be at least 32 characters' }),
  SMTP_URL: optionalUrl(['smtp', 'smtps']),
  ROLE: z.enum(ROLES).default('all'),
  READY_MAX_LAG_SECONDS: integer(30, 0, 86_400),
  SETTLEMENT_DELAY_SECONDS: integer(60, 0, 86_400),
  RATE_LIMIT_WINDOW_SECONDS: integer(60, 1, 86_400),
  RATE_LIMIT_API_TOKEN_REQUESTS: integer(300, 1, 1_000_000),
  RATE_LIMIT_USER_TOKEN_REQUESTS: integer(60, 1, 1_000_000),
  RATE_LIMIT_FAILED_AUTHENTICATIONS: integer(20, 1, 1_000_000),
  TRUST_PROXY: trustedProxies,
  WEBHOOK_ALLOW_PRIVATE_ADDRESSES: z
    .enum(['true', 'false', ''])
    .default('false')
    .transform((value) => value === 'true'),
});

/** Requests allowed per window: organisations may set their own token limits (admin settings). */
export interface RateLimitDefaults {
  windowSeconds: number;
  apiTokenRequests: number;
  userTokenRequests: number;
  /** Refused credentials per client address, before that address gets 429 whatever it sends. */
  failedAuthentications: number;
}

export interface Config {
  applicationName: string;
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  redisUrl: string | undefined;
  eventStore: 'postgres' | 'kurrentdb';
  kurrentDbConnectionString: string | undefined;
  platformDomain: string;
  logLevel: string;
  /** The level of a successful request's log line, or `off`; failures are logged at info (4xx) and error (5xx) whatever it says. */
  logRequests: RequestLogging;
  bodyLimit: string;
  readYourWritesTimeoutMs: number;
  shutdownTimeoutMs: number;
  /** V8's `--heap-growing-percent` for the service process (0: V8's own growth, up to 4× on a machine with plenty of memory). */
  heapGrowingPercent: number;
  databasePoolSize: number;
  databasePreparedStatements: number;
  /** Connect, statement and idle-in-transaction limits of PostgreSQL sessions, for requests and for background work. */
  databaseTimeouts: DatabaseTimeouts;
  redisConnectTimeoutMs: number;
  /** Each check of `/readyz` (PostgreSQL, the event store, Redis, the projections' lag) answers within this or counts as down. */
  readyCheckTimeoutMs: number;
  /** Signs user tokens; when unset, one is generated at first start and kept in `DATA_DIR/user-token-secret`. */
  userTokenSecret: string | undefined;
  /** Where invitation e-mails go (`smtp://user:pass@host:587`); without it they are written to the log instead. */
  smtpUrl: string | undefined;
  /** What this process runs (infra/roles.ts): everything, one API side, the projectors, or the job worker. */
  role: Role;
  /** `/readyz` fails while a live projection is further behind than this (0: never checked). */
  readyMaxLagSeconds: number;
  /** How long after a leaderboard window ends, or a draw is due, late events still count before it is settled. */
  settlementDelaySeconds: number;
  rateLimits: RateLimitDefaults;
  /** Express's `trust proxy`: whose X-Forwarded-For is believed for the client's address. */
  trustProxy: string;
  /** Webhooks may go to private, loopback and link-local addresses (local set-ups and tests); never otherwise. */
  webhookAllowPrivateAddresses: boolean;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Reads and checks the environment once, at start-up; every problem names its variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = environment.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`));
  }
  const value = parsed.data;
  if (value.EVENT_STORE === 'kurrentdb' && !value.KURRENTDB_CONNECTION_STRING) {
    throw new ConfigError(['KURRENTDB_CONNECTION_STRING: required when EVENT_STORE=kurrentdb']);
  }
  if (value.ROLE !== 'all' && !value.DATABASE_URL) {
    throw new ConfigError([`ROLE: ${value.ROLE} needs DATABASE_URL (embedded mode is one process: ROLE=all)`]);
  }
  return {
    port: value.PORT,
    host: value.HOST,
    dataDir: resolve(value.DATA_DIR),
    databaseUrl: value.DATABASE_URL,
    redisUrl: value.REDIS_URL,
    eventStore: value.EVENT_STORE,
    kurrentDbConnectionString: value.KURRENTDB_CONNECTION_STRING,
    platformDomain: value.PLATFORM_DOMAIN,
    logLevel: value.LOG_LEVEL,
    logRequests: value.LOG_REQUESTS,
    bodyLimit: value.BODY_LIMIT,
    readYourWritesTimeoutMs: value.READ_YOUR_WRITES_TIMEOUT_MS,
    shutdownTimeoutMs: value.SHUTDOWN_TIMEOUT_MS,
    heapGrowingPercent: value.HEAP_GROWING_PERCENT,
    databasePoolSize: value.DATABASE_POOL_SIZE,
    databasePreparedStatements: value.DATABASE_PREPARED_STATEMENTS,
    databaseTimeouts: {
      connectMs: value.DATABASE_CONNECT_TIMEOUT_MS,
      statementMs: value.DATABASE_STATEMENT_TIMEOUT_MS,
      idleInTransactionMs: value.DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS,
      backgroundStatementMs: value.DATABASE_BACKGROUND_STATEMENT_TIMEOUT_MS,
      backgroundIdleInTransactionMs: value.DATABASE_BACKGROUND_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    },
    redisConnectTimeoutMs: value.REDIS_CONNECT_TIMEOUT_MS,
    readyCheckTimeoutMs: value.READY_CHECK_TIMEOUT_MS,
    applicationName: value.APPLICATION_NAME ?? `engage-${value.ROLE}`,
    userTokenSecret: value.USER_TOKEN_SECRET,
    smtpUrl: value.SMTP_URL,
    role: value.ROLE,
    readyMaxLagSeconds: value.READY_MAX_LAG_SECONDS,
    settlementDelaySeconds: value.SETTLEMENT_DELAY_SECONDS,
    rateLimits: {
      windowSeconds: value.RATE_LIMIT_WINDOW_SECONDS,
      apiTokenRequests: value.RATE_LIMIT_API_TOKEN_REQUESTS,
      userTokenRequests: value.RATE_LIMIT_USER_TOKEN_REQUESTS,
      failedAuthentications: value.RATE_LIMIT_FAILED_AUTHENTICATIONS,
    },
    trustProxy: value.TRUST_PROXY,
    webhookAllowPrivateAddresses: value.WEBHOOK_ALLOW_PRIVATE_ADDRESSES,
  };
}
