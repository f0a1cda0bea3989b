import { PassThrough } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { createLogger, requestLineWriter, withLogContext, type Logger, type RequestLine } from '../infra/logging.ts';

/** Each line a logger writes, as text, with its time made fixed (the two writes below happen at different instants). */
function captured(make: (stream: PassThrough) => Logger) {
  const stream = new PassThrough();
  const lines: string[] = [];
  stream.on('data', (chunk: Buffer) => lines.push(...chunk.toString().split('\n').filter(Boolean)));
  return { logger: make(stream), lines: () => lines.map((line) => line.replace(/"time":\d+/, '"time":0')) };
}

const LINES: RequestLine[] = [
  {
    req: { id: 'r-1', method: 'POST', url: '/api/v2/admin/events/custom', host: 'acme.test' },
    traceId: undefined,
    organisationId: 'org-1',
    statusCode: 200,
    responseTime: 3,
  },
  {
    req: { id: 'r-2', method: 'GET', url: '/x?q="quoted" \\ \u2028', host: undefined },
    traceId: 'abc123',
    organisationId: undefined,
    statusCode: 404,
    responseTime: 0,
  },
];

/** What pino writes for the same line (pino leaves out a field that is undefined). */
function throughPino(logger: Logger, level: 'info' | 'debug', line: RequestLine, msg: string): void {
  const { req, traceId, organisationId, statusCode, responseTime } = line;
  logger[level]({ req, traceId, organisationId, res: { statusCode }, responseTime }, msg);
}

function sameBytes(make: (stream: PassThrough) => Logger, level: 'info' | 'debug' = 'info', around: (write: () => void) => void = (write) => write()) {
  const fast = captured(make);
  const plain = captured(make);
  const write = requestLineWriter(fast.logger);
  around(() => {
    for (const line of LINES) write(level, line, 'request completed');
    for (const line of LINES) throughPino(plain.logger, level, line, 'request completed');
  });
  expect(fast.lines()).toHaveLength(LINES.length);
  expect(fast.lines()).toEqual(plain.lines());
  return fast.lines().map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('a request line written without pino’s generic path', () => {
  it('is the line pino writes, byte for byte, from the service’s logger', () => {
    const [first, second] = sameBytes((stream) => createLogger('info', stream));
    expect(first).toEqual({
      level: 30,
      time: 0,
      service: 'engage',
      req: LINES[0]!.req,
      organisationId: 'org-1',
      res: { statusCode: 200 },
      responseTime: 3,
      msg: 'request completed',
    });
    expect(second).toMatchObject({ traceId: 'abc123', req: { id: 'r-2', method: 'GET', url: '/x?q="quoted" \\ \u2028' } });
    expect(second).not.toHaveProperty('organisationId');
  });

  it('carries a child logger’s bindings, its message prefix and the debug level', () => {
    sameBytes((stream) => createLogger('debug', stream).child({ role: 'command-api' }, { msgPrefix: '[api] ' }), 'debug');
  });

  it('goes through pino where the logger adds to a line: a log context’s fields, a serializer, a formatter', () => {
    const inContext = sameBytes(
      (stream) => createLogger('info', stream),
      'info',
      (write) => withLogContext({ jobId: 'job-9' }, write),
    );
    expect(inContext[0]).toMatchObject({ jobId: 'job-9', organisationId: 'org-1' });
    const serialized = sameBytes((stream) => pino({ serializers: { req: (req: { id: string }) => ({ only: req.id }) } }, stream));
    expect(serialized[0]!.req).toEqual({ only: 'r-1' });
    const formatted = sameBytes((stream) => pino({ formatters: { log: (fields) => ({ ...fields, formatted: true }) } }, stream));
    expect(formatted[0]).toMatchObject({ formatted: true });
  });
});
