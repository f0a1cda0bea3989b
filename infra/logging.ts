import { pino, type Logger as PinoLogger } from 'pino';

export type Logger = PinoLogger;

export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { service: 'engage' },
    redact: { paths: ['req.headers["x-api-token"]', 'req.headers.authorization', 'req.headers["x-console-secret"]'], censor: '[redacted]' },
  });
}
