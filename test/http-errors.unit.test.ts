import type { Server } from 'node:http';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DomainError } from '../domain/decider.ts';
import { WrongExpectedRevisionError } from '../infra/event-store/port.ts';
import { errorHandler, unknownRoute } from '../infra/http/errors.ts';
import { createHttpApp } from '../infra/http/plumbing.ts';
import { parse } from '../api/routes.ts';
import { httpClient } from './support/http.ts';

describe('HTTP error plumbing', () => {
  let server: Server;
  let request: ReturnType<typeof httpClient>;

  beforeAll(async () => {
    const app = createHttpApp(pino({ level: 'silent' }), '1kb');
    app.get('/boom', () => {
      throw new Error('connection string postgres://secret@db');
    });
    app.get('/conflict', () => {
      throw new WrongExpectedRevisionError('leaderboard-1', 3n, 4n);
    });
    app.get('/domain', () => {
      throw new DomainError('invalid', 'expiresAt must be after startsAt');
    });
    app.post('/echo', (req, res) => {
      res.json(parse(z.object({ n: z.number().int() }), req.body));
    });
    app.use(unknownRoute);
    app.use(errorHandler);
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    request = httpClient(server);
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('answers an unexpected failure with 500 and nothing of the internals', async () => {
    const response = await request('GET', '/boom');
    expect(response.status).toBe(500);
    expect(response.body).toEqual({ message: 'Internal server error', code: 'INTERNAL_SERVER_ERROR' });
    expect(response.text).not.toContain('secret');
  });

  it('maps a concurrency conflict to 409 and a domain refusal to 400', async () => {
    expect((await request('GET', '/conflict')).body).toMatchObject({ code: 'CONFLICT' });
    expect((await request('GET', '/conflict')).status).toBe(409);
    const refused = await request('GET', '/domain');
    expect(refused.status).toBe(400);
    expect(refused.body).toEqual({ message: 'Invalid input data', code: 'BAD_REQUEST', issues: [{ message: 'expiresAt must be after startsAt' }] });
  });

  it('zod failures are 400 with issues; too large is 413; unknown routes are 404', async () => {
    const invalid = await request('POST', '/echo', { body: { n: 1.5 } });
    expect(invalid.status).toBe(400);
    expect(invalid.body.issues[0]).toMatchObject({ path: ['n'] });
    expect((await request('POST', '/echo', { body: { n: 'x'.repeat(2000) } })).status).toBe(413);
    expect((await request('GET', '/nowhere')).body).toEqual({ message: 'No route for GET /nowhere', code: 'NOT_FOUND' });
  });

  it('echoes a sane x-request-id and replaces an unsafe one', async () => {
    expect((await request('GET', '/nowhere', { headers: { 'x-request-id': 'abc-123' } })).headers['x-request-id']).toBe('abc-123');
    expect((await request('GET', '/nowhere', { headers: { 'x-request-id': 'bad id with spaces' } })).headers['x-request-id']).not.toBe('bad id with spaces');
  });
});
