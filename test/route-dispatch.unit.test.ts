import type { Server } from 'node:http';
import express, { Router } from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dispatchByFirstSegment } from '../infra/http/route-dispatch.ts';
import { httpClient } from './support/http.ts';

/** The family dispatch answers as the routers mounted one after the other would, entering fewer of them. */
describe('routers dispatched by the first path segment', () => {
  let server: Server;
  let request: ReturnType<typeof httpClient>;
  const entered: string[] = [];

  const named = (name: string, router: Router) => {
    // Counts the router as entered when any of its routes is tried (a route's own first handler).
    for (const layer of router.stack as { route?: { stack: { handle: unknown }[] } }[]) {
      const first = layer.route?.stack[0];
      if (!first) continue;
      const handle = first.handle as express.RequestHandler;
      first.handle = (req: express.Request, res: express.Response, next: express.NextFunction) => {
        entered.push(name);
        handle(req, res, next);
      };
    }
    return router;
  };

  beforeAll(async () => {
    const items = Router();
    items.get('/items', (_req, res) => void res.json({ from: 'items' }));
    items.get('/items/:id', (req, res, next) => (req.params.id === 'mine' ? void res.json({ from: 'items', id: 'mine' }) : next()));
    const more = Router();
    more.get('/items/:id', (req, res) => void res.json({ from: 'more', id: req.params.id }));
    more.post('/things', (_req, res) => void res.status(201).json({ from: 'more' }));
    const guarded = Router();
    guarded.use((req, _res, next) => {
      if (req.get('x-refuse')) throw new Error('refused');
      next();
    });
    guarded.get('/guarded', (_req, res) => void res.json({ from: 'guarded' }));
    const params = Router();
    params.get('/:anything/deep', (req, res) => void res.json({ from: 'params', anything: req.params.anything }));
    const app = express();
    app.use('/api', dispatchByFirstSegment([named('items', items), named('more', more), guarded, named('params', params)]));
    app.use((_req, res) => void res.status(404).json({ from: 'unknown' }));
    app.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => void res.status(500).json({ error: error.message }));
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    request = httpClient(server);
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it('answers as the routers would in their order, entering only those that can take the path', async () => {
    entered.length = 0;
    expect((await request('GET', '/api/items')).body).toEqual({ from: 'items' });
    expect(entered).toEqual(['items']);
    // Routing ignores case; a route that passes goes on to the next router that can take the path.
    expect((await request('GET', '/api/ITEMS/mine')).body).toEqual({ from: 'items', id: 'mine' });
    expect((await request('GET', '/api/items/other')).body).toEqual({ from: 'more', id: 'other' });
    expect((await request('POST', '/api/things')).status).toBe(201);
    expect((await request('GET', '/api/things/deep')).body).toEqual({ from: 'params', anything: 'things' });
    entered.length = 0;
    expect((await request('GET', '/api/other/deep')).body).toEqual({ from: 'params', anything: 'other' });
    expect(entered).toEqual(['params']);
  });

  it('always enters a router with a middleware of its own, and passes errors on', async () => {
    expect((await request('GET', '/api/guarded')).body).toEqual({ from: 'guarded' });
    expect((await request('GET', '/api/guarded', { headers: { 'x-refuse': '1' } })).body).toEqual({ error: 'refused' });
    expect((await request('GET', '/api/nothing')).body).toEqual({ from: 'unknown' });
    expect((await request('GET', '/api/')).body).toEqual({ from: 'unknown' });
  });
});
