/**
 * The write path's reference (bench/write-path.ts runs it in a process of its own): a bare `node:http` server
 * doing the least a durable write must do. It reads the request's body, parses it as JSON, and inserts it as
 * one JSONB row with a unique key through a `pg` pool of the service's size, then answers 200 with the
 * number of rows. A body that is an array (a batch, as `POST /events/custom/batch` takes it) becomes that
 * many rows in one INSERT (`unnest`), the same number of events the service appends. The key is the event's
 * `nonce` when it has one (so a nonce costs a unique-index check, as it does in the service), a random UUID
 * otherwise. `DELETE /rows` empties its table.
 *
 *   REFERENCE_DATABASE_URL=postgres://... REFERENCE_POOL_SIZE=10 npx tsx bench/write-reference.ts
 *
 * Prints `{"listening": <port>}` on stdout once it listens (127.0.0.1, a free port); stops on SIGTERM.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type ServerResponse } from 'node:http';
import pg from 'pg';

const url = process.env.REFERENCE_DATABASE_URL;
if (!url) {
  console.error('REFERENCE_DATABASE_URL is required');
  process.exit(2);
}
const TABLE = 'bench_reference_writes';

const pool = new pg.Pool({
  connectionString: url,
  max: Number(process.env.REFERENCE_POOL_SIZE ?? 10),
  application_name: 'engage-bench-reference',
  connectionTimeoutMillis: 10_000,
  query_timeout: 10_000,
  statement_timeout: 10_000,
});
pool.on('error', () => undefined);
await pool.query(`create table if not exists ${TABLE} (id text primary key, data jsonb not null, created_at timestamptz not null default now())`);

type Json = Record<string, unknown>;
const keyOf = (value: Json) => (typeof value.nonce === 'string' ? value.nonce : randomUUID());

function reply(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

const server = createServer((req, res) => {
  // `DELETE /rows`: the bench empties the table before each run of the reference (bench/write-path.ts).
  if (req.method === 'DELETE' && req.url === '/rows') {
    req.resume();
    pool.query(`truncate ${TABLE}`).then(
      () => reply(res, 200, { emptied: true }),
      (error: unknown) => reply(res, 500, { code: 'INTERNAL_ERROR', message: String(error) }),
    );
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    let body: Json | Json[];
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Json | Json[];
      if (typeof body !== 'object' || body === null) throw new Error('not an object');
    } catch {
      return reply(res, 400, { code: 'VALIDATION_ERROR', message: 'The body is neither a JSON object nor an array' });
    }
    const events = Array.isArray(body) ? body : null;
    const insert = events
      ? pool.query(`insert into ${TABLE} (id, data) select * from unnest($1::text[], $2::jsonb[])`, [
          events.map(keyOf),
          events.map((event) => JSON.stringify(event)),
        ])
      : pool.query(`insert into ${TABLE} (id, data) values ($1, $2)`, [keyOf(body as Json), JSON.stringify(body)]);
    insert.then(
      (result) => reply(res, 200, { inserted: result.rowCount }),
      (error: unknown) => reply(res, 500, { code: 'INTERNAL_ERROR', message: String(error) }),
    );
  });
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  console.log(JSON.stringify({ listening: typeof address === 'object' && address ? address.port : null }));
});

process.on('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  void pool.end().finally(() => process.exit(0));
});
