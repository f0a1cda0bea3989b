/** Where a line of output goes: stdout unless a caller (a test, a command writing elsewhere) says otherwise. */
export type WriteLine = (line: string) => void;

const stdoutLine: WriteLine = (line) => console.log(line);

/** Human output of the CLI: a two-column record or an aligned table; machine output is JSON / NDJSON. */
export function printRecord(record: Record<string, unknown>, write: WriteLine = stdoutLine): void {
  const width = Math.max(...Object.keys(record).map((key) => key.length));
  for (const [key, value] of Object.entries(record)) write(`${key.padEnd(width)}  ${format(value)}`);
}

export function printTable(rows: Record<string, unknown>[], columns: string[], write: WriteLine = stdoutLine): void {
  if (rows.length === 0) return write('(none)');
  const cells = rows.map((row) => columns.map((column) => format(row[column])));
  const widths = columns.map((column, i) => Math.max(column.length, ...cells.map((line) => line[i]!.length)));
  const line = (values: string[]) =>
    values
      .map((value, i) => value.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  write(line(columns));
  write(line(widths.map((width) => '-'.repeat(width))));
  for (const row of cells) write(line(row));
}

function format(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (typeof value === 'number') return Number.isInteger(value) ? String(value) : value.toFixed(2);
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean' || typeof value === 'bigint') return value.toString();
  if (value instanceof Date) return value.toString();
  if (Array.isArray(value)) return value.join(',');
  return JSON.stringify(value) ?? typeof value;
}

/**
 * A duration for a person to read: `0`, `850 ms`, `4.2 s`, `12 s`, `4 min 12 s`, `3 h 5 min`, `335 d 11 h` (the
 * two largest units; machine output keeps the seconds).
 */
export function humanDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds <= 0) return '0';
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds < 10 ? seconds.toFixed(1) : Math.floor(seconds)} s`;
  const whole = Math.floor(seconds);
  const [days, hours, minutes, secs] = [Math.floor(whole / 86_400), Math.floor(whole / 3600) % 24, Math.floor(whole / 60) % 60, whole % 60];
  if (days > 0) return `${days} d ${hours} h`;
  if (hours > 0) return `${hours} h ${minutes} min`;
  return `${minutes} min ${secs} s`;
}

/** A refusal the CLI reports as `engage: <message>` with exit code 1. */
export class CliError extends Error {}
