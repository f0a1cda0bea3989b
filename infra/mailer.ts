import type { Transporter } from 'nodemailer';
import type { Logger } from './logging.ts';

export interface Mail {
  to: string;
  subject: string;
  text: string;
  html: string;
}

export interface Mailer {
  /** Sends one message; resolves with the transport's message id. */
  send(mail: Mail): Promise<{ messageId: string | null }>;
}

/**
 * Outgoing e-mail through nodemailer: SMTP when `SMTP_URL` is set, otherwise a JSON transport whose
 * messages are written to the log (embedded mode has no mail server). Tests pass their own transport.
 */
export function createMailer(options: { smtpUrl: string | undefined; from: string; logger: Logger; transport?: Transporter }): Mailer {
  const logged = !options.transport && !options.smtpUrl;
  // nodemailer is loaded with the first message: most processes (the API roles, the CLI) never send one, and it
  // cost each of them 0.17 s and 15 MB at start.
  let transport: Promise<Transporter> | null = options.transport ? Promise.resolve(options.transport) : null;
  const transportOf = () =>
    (transport ??= import('nodemailer')
      .then(({ default: nodemailer }) => (options.smtpUrl ? nodemailer.createTransport(options.smtpUrl) : nodemailer.createTransport({ jsonTransport: true })))
      .catch((error: unknown) => {
        // Not kept: the next message tries again.
        transport = null;
        throw error;
      }));
  return {
    async send(mail) {
      const info = await (await transportOf()).sendMail({ from: options.from, ...mail });
      if (logged) options.logger.info({ mail: JSON.parse(String(info.message)) }, 'e-mail not sent (no SMTP_URL); logged instead');
      return { messageId: typeof info.messageId === 'string' ? info.messageId : null };
    },
  };
}
