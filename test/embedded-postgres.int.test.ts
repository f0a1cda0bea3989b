import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, chownSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { dataFolderOf, ensureOsUser, openEmbeddedPostgres, readPostmaster, type EmbeddedPostgres } from '../infra/embedded-postgres.ts';
import { isRunning, runningPostmaster, temporaryDirectories } from './support/embedded.ts';
import { waitUntil } from './support/projections.ts';

/**
 * The embedded PostgreSQL (infra/embedded-postgres.ts): real servers from the embedded-postgres binaries,
 * each in a data directory of its own. Every process that uses one is a member; the last one out stops it.
 */
const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
const root = process.getuid?.() === 0;
const directories = temporaryDirectories('engage-embedded-');
const dataDir = directories.make;
const opened: EmbeddedPostgres[] = [];

async function open(dir: string): Promise<EmbeddedPostgres> {
  const server = await openEmbeddedPostgres(dir, { logger });
  opened.push(server);
  return server;
}

async function answer(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  await client.connect();
  try {
    return (await client.query<{ version: string }>('select version()')).rows[0]!.version;
  } finally {
    await client.end();
  }
}

/** The server's address as the session sees it: null through a Unix socket. */
async function serverAddress(url: string): Promise<string | null> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  await client.connect();
  try {
    return (await client.query<{ address: string | null }>('select inet_server_addr()::text as address')).rows[0]!.address;
  } finally {
    await client.end();
  }
}

/** Sessions that hold a member's share of the server. */
async function members(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  await client.connect();
  try {
    return (await client.query<{ count: number }>(`select count(*)::int as count from pg_stat_activity where application_name = 'engage:embedded-member'`))
      .rows[0]!.count;
  } finally {
    await client.end();
  }
}

afterAll(async () => {
  for (const server of opened) await server.release();
  directories.removeAll();
});

describe('the embedded PostgreSQL', () => {
  it('is a real PostgreSQL on 127.0.0.1 and a Unix socket in its data folder, initialised on first start, and keeps its data across restarts', async () => {
    const dir = dataDir();
    const first = await open(dir);
    expect(first.url).toMatch(/^postgres:\/\/engage:[^@]+@127\.0\.0\.1:\d+\/postgres$/);
    expect(await answer(first.url)).toMatch(/^PostgreSQL 16\./);
    const client = new pg.Client({ connectionString: first.url });
    await client.connect();
    await client.query('create table kept (note text)');
    await client.query(`insert into kept values ('still here')`);
    const settings = await client.query<{ name: string; setting: string }>(
      `select name, setting from pg_settings where name in ('listen_addresses', 'unix_socket_directories', 'unix_socket_permissions') order by name`,
    );
    await client.end();
    const folder = dataFolderOf(dir);
    expect(settings.rows).toEqual([
      { name: 'listen_addresses', setting: '127.0.0.1' },
      { name: 'unix_socket_directories', setting: `"${folder}"` },
      { name: 'unix_socket_permissions', setting: '0700' },
    ]);
    // The password is the owner's alone, and so is the folder of the socket.
    expect(statSync(join(folder, 'engage.json')).mode & 0o077).toBe(0);
    expect(statSync(folder).mode & 0o077).toBe(0);
    expect(statSync(join(folder, `.s.PGSQL.${first.port}`)).isSocket()).toBe(true);
    // This process connects through the socket (no server address), with the password all the same.
    expect(first.socketDir).toBe(folder);
    expect(first.localUrl).not.toBe(first.url);
    expect(await serverAddress(first.localUrl)).toBeNull();
    expect(await serverAddress(first.url)).toBe('127.0.0.1/32');
    await expect(serverAddress(first.localUrl.replace(/:[^:@]+@/, ':wrong@'))).rejects.toThrow(/password authentication failed/);
    const pid = runningPostmaster(dir)!;
    await first.release();
    expect(isRunning(pid)).toBe(false);
    expect(runningPostmaster(dir)).toBeNull();

    const again = await open(dir);
    const reader = new pg.Client({ connectionString: again.url });
    await reader.connect();
    expect((await reader.query('select note from kept')).rows).toEqual([{ note: 'still here' }]);
    await reader.end();
    await again.release();
  });

  it('is shared by its members and stopped by the last one out', async () => {
    const dir = dataDir();
    const [a, b] = await Promise.all([open(dir), open(dir)]);
    expect(b.port).toBe(a.port);
    const pid = runningPostmaster(dir)!;
    await a.release();
    expect(await answer(b.url)).toMatch(/^PostgreSQL/);
    const c = await open(dir);
    expect(c.port).toBe(a.port);
    await b.release();
    expect(isRunning(pid)).toBe(true);
    await c.release();
    expect(isRunning(pid)).toBe(false);
    expect(runningPostmaster(dir)).toBeNull();
  });

  it('starts again after kill -9: the server is joined when it survived, started anew over its stale postmaster.pid when not', async () => {
    const dir = dataDir();
    // A process that started the server is killed with -9: the server (a session of its own) survives, and
    // the member's share went with its connection.
    const member = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/embedded-member.ts', dir], { stdio: ['ignore', 'pipe', 'inherit'] });
    const [line] = (await once(member.stdout, 'data')) as [Buffer];
    expect(line.toString()).toMatch(/^joined \d+/);
    const pid = runningPostmaster(dir)!;
    const port = Number(line.toString().split(' ')[1]);
    member.kill('SIGKILL');
    await once(member, 'exit');
    expect(isRunning(pid)).toBe(true);
    const next = await open(dir);
    expect(next.port).toBe(port);
    // Its share goes once its session has noticed the kill (the last member waits that long too).
    await waitUntil(async () => (await members(next.url)) === 1, 10_000, "the killed member's session to end");
    expect(runningPostmaster(dir)).toBe(pid);
    // The one left is the last member: leaving stops the server.
    await next.release();
    expect(isRunning(pid)).toBe(false);

    // A postmaster.pid naming a dead process, then one naming a live program that is not PostgreSQL (a pid
    // reused after a restart): neither stops the next start.
    const folder = dataFolderOf(dir);
    const gone = spawn(process.execPath, ['-e', '']);
    await once(gone, 'exit');
    const stranger = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)']);
    try {
      for (const stalePid of [gone.pid!, stranger.pid!]) {
        writeFileSync(join(folder, 'postmaster.pid'), `${stalePid}\n${folder}\n1700000000\n5432\n\n127.0.0.1\n  1234  5678\nready   \n`);
        if (root) chownSync(join(folder, 'postmaster.pid'), statSync(folder).uid, statSync(folder).gid);
        const next = await open(dir);
        expect(runningPostmaster(dir)).not.toBe(stalePid);
        expect(await answer(next.url)).toMatch(/^PostgreSQL/);
        await next.release();
      }
    } finally {
      stranger.kill('SIGKILL');
    }
  });

  it('comes back when its server is killed while members use it', async () => {
    const dir = dataDir();
    const member = await open(dir);
    const pid = runningPostmaster(dir)!;
    process.kill(pid, 'SIGKILL');
    await waitUntil(
      () => ![null, pid].includes(runningPostmaster(dir)) && readPostmaster(dataFolderOf(dir))?.status === 'ready',
      30_000,
      'the server to be started again',
    );
    // On the port it had: the pools of the processes using it connect there.
    expect(readPostmaster(dataFolderOf(dir))!.port).toBe(member.port);
    expect(await answer(member.url)).toMatch(/^PostgreSQL/);
    await member.release();
    expect(runningPostmaster(dir)).toBeNull();
  });

  it('listens on TCP only when the path of its socket would be too long for a Unix socket', async () => {
    const parent = dataDir();
    // Run by root, the server's OS user must pass through the folder above DATA_DIR.
    chmodSync(parent, 0o711);
    const deep = join(parent, 'a-data-directory-with-a-name-long-enough-to-make-the-socket-path-too-long');
    const server = await open(deep);
    expect(server.socketDir).toBeNull();
    expect(server.localUrl).toBe(server.url);
    expect(await answer(server.localUrl)).toMatch(/^PostgreSQL 16\./);
    await server.release();
  });

  it('refuses a data folder it did not create, and changes nothing in it', async () => {
    const notOurs = dataDir();
    mkdirSync(join(notOurs, 'postgres'));
    writeFileSync(join(notOurs, 'postgres', 'PG_VERSION'), '16\n');
    await expect(open(notOurs)).rejects.toThrow(/engage did not create \(no engage\.json\)/);
    const notEmpty = dataDir();
    mkdirSync(join(notEmpty, 'postgres'));
    writeFileSync(join(notEmpty, 'postgres', 'notes.txt'), 'mine');
    await expect(open(notEmpty)).rejects.toThrow(/is not empty and holds no PostgreSQL data folder/);
    expect(readFileSync(join(notEmpty, 'postgres', 'notes.txt'), 'utf8')).toBe('mine');
  });
});

describe.runIf(root)('the embedded PostgreSQL run by root', () => {
  it('runs as the OS user postgres, which owns the data folder, also one that another user made', async () => {
    const dir = dataDir();
    const postgres = ensureOsUser('postgres');
    const first = await open(dir);
    const pid = runningPostmaster(dir)!;
    expect(statSync(`/proc/${pid}`).uid).toBe(postgres.uid);
    expect(statSync(dataFolderOf(dir)).uid).toBe(postgres.uid);
    // Root reaches the socket in postgres's folder (mode 0700); another OS user cannot even enter that folder.
    expect(first.socketDir).toBe(dataFolderOf(dir));
    expect(await serverAddress(first.localUrl)).toBeNull();
    expect(spawnSync('/bin/sh', ['-c', 'cd "$1"', 'probe', dataFolderOf(dir)], { uid: 65534, gid: 65534, stdio: 'ignore' }).status).not.toBe(0);
    await first.release();

    // Copied or made by someone else (root here): handed over to postgres at the next start.
    execFileSync('chown', ['-R', '0:0', dataFolderOf(dir)]);
    const second = await open(dir);
    expect(statSync(dataFolderOf(dir)).uid).toBe(postgres.uid);
    expect(statSync(join(dataFolderOf(dir), 'base')).uid).toBe(postgres.uid);
    await second.release();
  });

  it('says which folder keeps the postgres user out', async () => {
    const closed = dataDir();
    chmodSync(closed, 0o700);
    await expect(open(join(closed, 'data'))).rejects.toThrow(/runs as the OS user postgres, which cannot reach/);
  });

  it('creates the OS user it runs as when it is missing', () => {
    const name = `engagetest${process.pid}`;
    spawnSync('userdel', [name]);
    try {
      const created = ensureOsUser(name);
      expect(created.uid).toBe(Number(execFileSync('id', ['-u', name], { encoding: 'utf8' }).trim()));
      expect(created.gid).toBe(Number(execFileSync('id', ['-g', name], { encoding: 'utf8' }).trim()));
      expect(ensureOsUser(name)).toEqual(created);
    } finally {
      spawnSync('userdel', [name]);
      spawnSync('groupdel', [name]);
    }
  });
});
