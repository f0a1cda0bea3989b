import { PassThrough } from 'node:stream';
import type { Transporter } from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpApp, type RequestLogging } from '../infra/http/plumbing.ts';
import { createLogger, withLogContext } from '../infra/logging.ts';
import { httpClient } from './support/http.ts';
import { asTenant, startTestService, type Tenant, type TestService } from './support/service.ts';

/** A logger as the service makes it (infra/logging.ts), writing its JSON lines where the test reads them. */
function capturedLogger(level = 'info') {
  const stream = new PassThrough();
  const lines: Record<string, any>[] = [];
  let text = '';
  stream.on('data', (chunk: Buffer) => {
    text += chunk.toString();
    for (let end = text.indexOf('\n'); end !== -1; end = text.indexOf('\n')) {
      lines.push(JSON.parse(text.slice(0, end)));
      text = text.slice(end + 1);
    }
  });
  return { logger: createLogger(level, stream), lines, raw: () => lines.map((line) => JSON.stringify(line)).join('\n') };
}

const completed = (lines: Record<string, any>[], url: string) => lines.filter((line) => line.req?.url === url && line.res);

describe('request and job logs', () => {
  const log = capturedLogger();
  let t: TestService;
  let acme: Tenant;
  const secretMarker = 'body-marker-7f3a9c';

  beforeAll(async () => {
    // Invitation e-mails fail to send: the job's retries are logged.
    const failingTransport = { sendMail: async () => Promise.reject(new Error('SMTP is down')) } as unknown as Transporter;
    t = await startTestService({ logger: log.logger, jobs: false, outside: { mailTransport: failingTransport } });
    acme = await t.createOrganisation('logs');
    await t.settle();
  });
  afterAll(() => t?.close());

  it('logs each successful request at info with its duration and organisation, never its body or credentials', async () => {
    const created = await t.request('POST', '/api/v2/admin/users', { ...asTenant(acme), body: { externalUserId: 'ann', displayName: secretMarker } });
    expect(created.status).toBe(201);
    const userToken = (await t.request('POST', `/api/v2/admin/users/${created.body.id}/tokens`, { ...asTenant(acme), body: {} })).body.token as string;
    const me = await t.request('GET', '/api/v2/integration/me', asTenant(acme, { authorization: `Bearer ${userToken}` }));
    expect(me.status).toBe(200);
    const refused = await t.request('POST', '/api/v2/admin/users', { ...asTenant(acme), body: { externalUserId: secretMarker, unknownField: secretMarker } });
    expect(refused.status).toBe(400);
    const forged = await t.request('GET', '/api/v2/admin/users', { host: acme.domain, headers: { 'x-api-token': `${acme.token}forged` } });
    expect(forged.status).toBe(401);

    const [line] = completed(log.lines, '/api/v2/admin/users').filter((l) => l.res.statusCode === 201);
    expect(line).toMatchObject({
      level: 30,
      organisationId: acme.organisationId,
      responseTime: expect.any(Number),
      req: { method: 'POST', host: acme.domain },
    });
    expect(completed(log.lines, '/api/v2/integration/me')).toEqual([expect.objectContaining({ level: 30, organisationId: acme.organisationId })]);
    // A refused request is logged too (info), with the organisation once its token named it.
    expect(completed(log.lines, '/api/v2/admin/users').find((l) => l.res.statusCode === 400)).toMatchObject({ level: 30, organisationId: acme.organisationId });
    expect(completed(log.lines, '/api/v2/admin/users').find((l) => l.res.statusCode === 401)?.organisationId).toBeUndefined();

    const everything = log.raw();
    for (const secret of [acme.token, userToken, secretMarker, 'forged']) expect(everything).not.toContain(secret);
    expect(everything).not.toMatch(/x-api-token|authorization/i);
  });

  it('names the job and its organisation on every line a job logs', async () => {
    expect((await t.request('POST', '/api/v2/admin/teams/invite', { ...asTenant(acme), body: { emails: ['invitee@example.com'] } })).status).toBe(200);
    await t.settle();
    await t.service.jobs.runDue();
    const failed = log.lines.filter((line) => line.msg === 'job failed; will retry');
    expect(failed).toEqual([
      expect.objectContaining({ level: 40, kind: 'invitation-email', organisationId: acme.organisationId, jobId: expect.any(String), attempt: 1 }),
    ]);
  });
});

describe('LOG_REQUESTS', () => {
  async function requestsLoggedWith(setting: RequestLogging, level: string) {
    const log = capturedLogger(level);
    const app = createHttpApp(log.logger, '1kb', undefined, setting);
    app.get('/ok', (_req, res) => void res.json({ ok: true }));
    app.get('/missing', (_req, res) => void res.status(404).json({ message: 'Not found', code: 'NOT_FOUND' }));
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const request = httpClient(server);
      expect((await request('GET', '/ok')).status).toBe(200);
      expect((await request('GET', '/missing')).status).toBe(404);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    return Object.fromEntries(log.lines.filter((line) => line.res).map((line) => [line.req.url, line.level]));
  }

  it('sets the level of successful requests (info, debug or off); failures are logged whatever it says', async () => {
    expect(await requestsLoggedWith('info', 'info')).toEqual({ '/ok': 30, '/missing': 30 });
    expect(await requestsLoggedWith('debug', 'info')).toEqual({ '/missing': 30 });
    expect(await requestsLoggedWith('debug', 'debug')).toEqual({ '/ok': 20, '/missing': 30 });
    expect(await requestsLoggedWith('off', 'trace')).toEqual({ '/missing': 30 });
  });
});

describe('the log context of a job', () => {
  it('adds its fields to every line logged inside it, and only its own', () => {
    const log = capturedLogger();
    withLogContext({ jobId: 'job-1', organisationId: 'org-1' }, () => {
      log.logger.warn({ attempt: 1 }, 'one');
      log.logger.info('two');
    });
    log.logger.info('outside');
    expect(log.lines.map(({ msg, jobId, organisationId, attempt }) => ({ msg, jobId, organisationId, attempt }))).toEqual([
      { msg: 'one', jobId: 'job-1', organisationId: 'org-1', attempt: 1 },
      { msg: 'two', jobId: 'job-1', organisationId: 'org-1', attempt: undefined },
      { msg: 'outside', jobId: undefined, organisationId: undefined, attempt: undefined },
    ]);
  });
});
