import { once } from 'node:events';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unknownRoute } from '../infra/http/errors.ts';
import { createHttpApp, createHttpServer } from '../infra/http/plumbing.ts';
import { routeLabelOf } from '../infra/http/route-label.ts';
import { Router, type Express } from 'express';

/**
 * The server of an app made by createHttpApp builds its requests and responses with the app's prototypes (so
 * express's per-request prototype change is a no-op and V8 keeps them on shared hidden classes), and what the
 * app's prototypes carry (express's methods, route labels, `req.log`) still works on them.
 */
describe('HTTP server of an app', () => {
  let app: Express;
  let server: Server;
  let base: string;
  const arrived: { request: object; response: object }[] = [];
  const labels: (string | undefined)[] = [];

  beforeAll(async () => {
    app = createHttpApp(pino({ level: 'silent' }), '1kb');
    const admin = Router();
    admin.get('/things/:thingId', (req, res) => {
      labels.push(routeLabelOf(req));
      req.log.info('a line through the request logger');
      res.json({ id: req.params.thingId, host: req.hostname, route: req.route?.path });
    });
    app.use('/admin', admin);
    app.use((req, res, next) => {
      res.on('finish', () => labels.push(routeLabelOf(req)));
      next();
    });
    app.use(unknownRoute);
    server = createHttpServer(app);
    server.prependListener('request', (request: IncomingMessage, response: ServerResponse) => {
      arrived.push({ request: Object.getPrototypeOf(request) as object, response: Object.getPrototypeOf(response) as object });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('makes requests and responses with the app prototypes, before express sees them', async () => {
    const response = await fetch(`${base}/admin/things/t-1`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ id: 't-1', host: '127.0.0.1', route: '/things/:thingId' });
    expect(response.headers.get('x-request-id')).toMatch(/./);
    expect(arrived.at(-1)).toEqual({ request: app.request, response: app.response });
  });

  it('labels a request with the pattern that matched, or the deepest mount it reached', async () => {
    labels.length = 0;
    await fetch(`${base}/admin/things/t-2`);
    const unknown = await fetch(`${base}/admin/nothing-here`);
    expect(unknown.status).toBe(404);
    const elsewhere = await fetch(`${base}/elsewhere`);
    expect(elsewhere.status).toBe(404);
    expect(labels).toEqual(['/admin/things/:thingId', '/admin/*', 'unmatched']);
  });
});
