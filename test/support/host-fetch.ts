import { request as httpRequest } from 'node:http';

/**
 * A fetch that sends every request to this machine's port, keeping the URL's host in the `Host` header
 * (fetch itself may not set it): how a client reaches `acme.engage.test` without DNS in a test.
 */
export function hostFetch(port: number): (input: Request) => Promise<Response> {
  return async (input) => {
    const url = new URL(input.url);
    const body = input.body ? Buffer.from(await input.arrayBuffer()) : undefined;
    return new Promise<Response>((resolve, reject) => {
      const outgoing = httpRequest(
        {
          host: '127.0.0.1',
          port,
          method: input.method,
          path: `${url.pathname}${url.search}`,
          headers: { ...Object.fromEntries(input.headers), host: url.host },
        },
        (incoming) => {
          const chunks: Buffer[] = [];
          incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
          incoming.on('end', () => {
            const headers = new Headers();
            for (const [name, value] of Object.entries(incoming.headers))
              if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
            const status = incoming.statusCode ?? 0;
            resolve(new Response(status === 204 ? null : Buffer.concat(chunks), { status, headers }));
          });
          incoming.on('error', reject);
        },
      );
      outgoing.on('error', reject);
      outgoing.end(body);
    });
  };
}
