import { describe, expect, it } from 'vitest';
import { humanDuration, printTable } from '../cli/output.ts';

describe('CLI output', () => {
  it('shows a duration in its two largest units', () => {
    expect([0, -1, Number.NaN].map(humanDuration)).toEqual(['0', '0', '0']);
    expect([0.0004, 0.85, 1, 9.96, 12.3, 59.9].map(humanDuration)).toEqual(['0 ms', '850 ms', '1.0 s', '10.0 s', '12 s', '59 s']);
    expect([60, 252.7, 3599].map(humanDuration)).toEqual(['1 min 0 s', '4 min 12 s', '59 min 59 s']);
    expect([3600, 11_100, 86_399].map(humanDuration)).toEqual(['1 h 0 min', '3 h 5 min', '23 h 59 min']);
    expect([86_400, 28_983_776.3].map(humanDuration)).toEqual(['1 d 0 h', '335 d 11 h']);
  });

  it('aligns a table under its headers, a missing value as a dash', () => {
    const lines: string[] = [];
    printTable(
      [
        { name: 'custom_events', behind: '0', lastError: null },
        { name: 'users', behind: '335 d 10 h', lastError: 'boom' },
      ],
      ['name', 'behind', 'lastError'],
      (line) => lines.push(line),
    );
    expect(lines).toEqual([
      'name           behind      lastError',
      '-------------  ----------  ---------',
      'custom_events  0           -',
      'users          335 d 10 h  boom',
    ]);
  });
});
