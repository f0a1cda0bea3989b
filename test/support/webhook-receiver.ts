import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import { Webhook } from 'standardwebhooks';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  json: { type: string; timestamp: string; data: Record<string, any> };
}

/** How the receiver answers its n-th request (from 0): a status, or `hang` (never answer; the request stays open). */
export type Answer = number | 'hang';

/**
 * A real HTTP receiver on a local port: records every request it gets, in order, and answers each as the
 * test says (200 by default).
 */
export async function startReceiver(answer: (received: Received, index: number) => Answer = () => 200) {
  const received: Received[] = [];
  const hanging: ServerResponse[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const entry: Received = { headers: req.headers, body, json: JSON.parse(body) };
      const index = received.push(entry) - 1;
      const status = answer(entry, index);
      if (status === 'hang') hanging.push(res);
      else res.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('receiver is not listening');
  return {
    url: `http://127.0.0.1:${address.port}/hooks`,
    received,
    ofType: (type: string) => received.filter((entry) => entry.json.type === type),
    /** Checks each request's Standard Webhooks signature with the secret (throws on a bad one) and returns its document. */
    verify: (secret: string, entry: Received) => new Webhook(secret).verify(entry.body, entry.headers as Record<string, string>),
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

export type Receiver = Awaited<ReturnType<typeof startReceiver>>;
