import { once } from 'node:events';
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorHandler } from '../infra/http/errors.ts';
import { createHttpApp, createHttpServer } from '../infra/http/plumbing.ts';

/**
 * A plain JSON body (application/json, no Content-Encoding, a Content-Length) is read without body-parser
 * (accepted-input.ts `readPlainJson`); every other one goes through it. Both must answer alike: each body
 * here is sent once with a Content-Length (the plain path) and once chunked (body-parser), and the answers
 * compared.
 */
describe('a plain JSON body, read as body-parser reads it', () => {
  let server: Server;
  let port: number;

  beforeAll(async () => {
    const app = createHttpApp(pino({ level: 'silent' }), '1kb');
    app.post('/echo', (req, res) => {
      res.json({ body: req.body as unknown });
    });
    app.use(errorHandler);
    server = createHttpServer(app);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  function post(body: Buffer, headers: Record<string, string>, chunked: boolean): Promise<{ status: number; body: unknown }> {
    return new Promise((resolve, reject) => {
      const request = http.request(
        { host: '127.0.0.1', port, method: 'POST', path: '/echo', headers: chunked ? headers : { ...headers, 'content-length': String(body.length) } },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('end', () => resolve({ status: response.statusCode!, body: JSON.parse(Buffer.concat(chunks).toString()) as unknown }));
        },
      );
      request.on('error', reject);
      if (chunked) request.write(body);
      request.end(chunked ? undefined : body);
    });
  }

  const JSON_TYPE = { 'content-type': 'application/json' };
  const bodies: [string, Buffer, Record<string, string>?][] = [
    ['an object', Buffer.from('{"name":"Tea for two","tags":["a",1,null]}')],
    ['an array', Buffer.from('[1,2,{"x":"y"}]')],
    ['white space around it', Buffer.from(' \n\t{"a":1}\r\n ')],
    ['a leading byte order mark', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"a":"b"}')])],
    ['a string (not an object or an array)', Buffer.from('"text"')],
    ['a number', Buffer.from('12')],
    ['null', Buffer.from('null')],
    ['cut JSON', Buffer.from('{"a":')],
    ['an escaped NUL', Buffer.from('{"a":"\\u0000"}')],
    ['an unpaired surrogate', Buffer.from('{"a":"\\ud800"}')],
    ['nesting past the limit', Buffer.from(`${'['.repeat(40)}${']'.repeat(40)}`)],
    ['bytes that are not UTF-8', Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])],
    ['a body over the limit', Buffer.from(`{"a":"${'x'.repeat(2000)}"}`)],
    ['upper-case type and charset', Buffer.from('{"a":1}'), { 'content-type': 'Application/JSON; Charset=UTF-8' }],
    ['a charset other than UTF-8', Buffer.from('{"a":1}'), { 'content-type': 'application/json; charset=latin1' }],
    ['another media type', Buffer.from('{"a":1}'), { 'content-type': 'text/plain' }],
  ];

  it.each(bodies)('%s', async (_name, body, headers = JSON_TYPE) => {
    const plain = await post(body, headers, false);
    const parsed = await post(body, headers, true);
    expect(plain).toEqual(parsed);
  });

  it('answers an object as it came', async () => {
    expect(await post(Buffer.from('{"a":[1,"b"]}'), JSON_TYPE, false)).toEqual({ status: 200, body: { body: { a: [1, 'b'] } } });
    expect((await post(Buffer.from('"text"'), JSON_TYPE, false)).status).toBe(400);
  });

  it('leaves a body cut short by its client without an answer to wait for, and serves the next request', async () => {
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.write('POST /echo HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 50\r\n\r\n{"a":');
    socket.destroy();
    expect(await post(Buffer.from('{"b":2}'), JSON_TYPE, false)).toEqual({ status: 200, body: { body: { b: 2 } } });
  });
});
