import { pino } from 'pino';
import { runConsoleOperation, type ConsoleOperationName } from '../command-api/console.ts';
import type { Config } from '../infra/config.ts';
import { inBackground } from '../infra/database.ts';
import { runningServer } from '../infra/server-file.ts';
import { openService, type Service } from '../service.ts';

export type RunOperation = (name: ConsoleOperationName, input: unknown) => Promise<any>;

export interface ConsoleOptions {
  /** Run the projectors in this process while the work lasts, when it opens the database itself (default true). */
  projectors?: boolean;
  /** Run due jobs in this process likewise (default true). */
  jobs?: boolean;
}

/**
 * Runs console operations where they can run: through the embedded server that owns the PGlite files
 * when one is up, otherwise in this process against the database (with the projectors running here until
 * done, so a command that waits for its read model does not wait for a server that is not there). `work`
 * is also given the service this process opened (null when a server does the work).
 */
export async function withConsole<T>(config: Config, work: (run: RunOperation, local: Service | null) => Promise<T>, options: ConsoleOptions = {}): Promise<T> {
  const server = config.databaseUrl ? null : runningServer(config.dataDir);
  if (server) {
    return work(async (name, input) => {
      const response = await fetch(`http://127.0.0.1:${server.port}/_console/${name}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-console-secret': server.consoleSecret },
        body: JSON.stringify(input),
      });
      const body = (await response.json()) as { message?: string; issues?: { message: string }[] };
      if (!response.ok) throw new ConsoleFailure(body.message ?? `HTTP ${response.status}`, body.issues);
      return body;
    }, null);
  }
  // Logs go to stderr: stdout carries the command's output (NDJSON a script may parse). The command reports
  // what it did itself, so the service's own warnings show only when LOG_LEVEL asks for debugging.
  const logger = pino({ level: ['info', 'warn'].includes(config.logLevel) ? 'error' : config.logLevel }, pino.destination(2));
  const service = await openService(config, logger, { projectors: options.projectors ?? true, jobs: options.jobs ?? true });
  try {
    // An operator's command may rightly read the whole log (a replay, a rebuild): background limits.
    return await inBackground(() => work((name, input) => runConsoleOperation(service, name, input, 'cli'), service));
  } finally {
    await service.close();
  }
}

export class ConsoleFailure extends Error {
  constructor(
    message: string,
    readonly issues: { message: string }[] = [],
  ) {
    super(message);
  }
}
