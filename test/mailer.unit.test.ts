import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { createMailer } from '../infra/mailer.ts';

/** Outgoing e-mail without an SMTP server (embedded mode): nodemailer's JSON transport, the message logged. */
describe('the mailer', () => {
  it('with no SMTP_URL, writes each message to the log instead of sending it, and answers its id', async () => {
    const lines: { msg: string; mail?: { to?: unknown; subject?: string } }[] = [];
    const log = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()) as (typeof lines)[number]);
        done();
      },
    });
    const mailer = createMailer({ smtpUrl: undefined, from: 'engage <no-reply@engage.test>', logger: pino(log) });
    const first = await mailer.send({ to: 'ada@example.test', subject: 'Welcome', text: 'Hello', html: '<p>Hello</p>' });
    const second = await mailer.send({ to: 'bob@example.test', subject: 'Again', text: 'Hi', html: '<p>Hi</p>' });
    expect(first.messageId).toMatch(/@/);
    expect(second.messageId).not.toBe(first.messageId);
    expect(lines.map((line) => [line.msg, line.mail?.subject])).toEqual([
      ['e-mail not sent (no SMTP_URL); logged instead', 'Welcome'],
      ['e-mail not sent (no SMTP_URL); logged instead', 'Again'],
    ]);
  });
});
