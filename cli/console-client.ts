import { pino } from 'pino';
import { runConsoleOperation, type ConsoleOperationName } from '../command-api/console.ts';
import type { Config } from '../infra/config.ts';
import { runningServer } from '../infra/server-file.ts';
import { openService } from '../service.ts';

export type RunOperation = (name: ConsoleOperationName, input: unknown) => Promise<any>;

/**
 * Runs console operations where they can run: through the embedded server that owns the PGlite files
 * when one is up, otherwise in this process against the database (with the projectors running here until
 * done, so a command that waits for its read model does not wait for a server that is not there).
 */
export async function withConsole<T>(config: Config, work: (run: RunOperation) => Promise<T>): Promise<T> {
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
    });
  }
  const service = await openService(config, pino({ level: config.logLevel === 'info' ? 'warn' : config.logLevel }));
  try {
    return await work((name, input) => runConsoleOperation(service, name, input, 'cli'));
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
