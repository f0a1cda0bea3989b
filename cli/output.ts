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

/** A refusal the CLI reports as `engage: <message>` with exit code 1. */
export class CliError extends Error {}
