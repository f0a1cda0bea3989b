import { request as httpRequest, type Server } from 'node:http';

export interface HttpResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
  text: string;
}

/** A client that can set `Host` (fetch cannot), which is how requests pick their organisation. */
export function httpClient(server: Server) {
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('server is not listening on a port');
  return httpClientOn(address.port);
}

/** The same, for a server listening on 127.0.0.1:`port` in another process. */
export function httpClientOn(port: number) {
  return function request(
    method: string,
    path: string,
    options: { host?: string; headers?: Record<string, string>; body?: unknown; rawBody?: string | Buffer } = {},
  ): Promise<HttpResponse> {
    const payload = options.rawBody ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          method,
          path,
          headers: {
            host: options.host ?? 'localhost',
            ...(payload !== undefined ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}),
            ...options.headers,
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let body: unknown = text;
            try {
              body = text ? JSON.parse(text) : undefined;
            } catch {
              // not JSON: the raw text is the body
            }
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text });
          });
        },
      );
      req.on('error', reject);
      if (payload !== undefined) req.write(payload);
      req.end();
    });
  };
}
