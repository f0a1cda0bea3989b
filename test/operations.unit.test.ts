import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { environment, loadConfig } from '../infra/config.ts';
import { ROLES, planFor, roleArgument } from '../infra/roles.ts';
import { csvLine, eta, replayFormat } from '../cli/operations.ts';

describe('process roles', () => {
  it('default to all-in-one; other roles need PostgreSQL, and say so', () => {
    expect(loadConfig({})).toMatchObject({ role: 'all', readyMaxLagSeconds: 30 });
    expect(loadConfig({ ROLE: 'worker', DATABASE_URL: 'postgres://db/engage', READY_MAX_LAG_SECONDS: '0' })).toMatchObject({
      role: 'worker',
      readyMaxLagSeconds: 0,
    });
    expect(() => loadConfig({ ROLE: 'projectors' })).toThrow(/ROLE: projectors needs DATABASE_URL/);
    expect(() => loadConfig({ ROLE: 'reader', DATABASE_URL: 'postgres://db/engage' })).toThrow(/ROLE:/);
    expect(() => loadConfig({ READY_MAX_LAG_SECONDS: '-1' })).toThrow(/READY_MAX_LAG_SECONDS:/);
  });

  it('pick what each process runs', () => {
    expect(ROLES.map((role) => [role, planFor(role)])).toEqual([
      ['all', { http: 'api', projectors: true, jobs: true }],
      ['command-api', { http: 'api', projectors: false, jobs: false }],
      ['query-api', { http: 'api', projectors: false, jobs: false }],
      ['projectors', { http: 'ops', projectors: true, jobs: false }],
      ['worker', { http: 'ops', projectors: false, jobs: true }],
    ]);
    expect(roleArgument(['--role=worker'])).toBe('worker');
    expect(roleArgument(['--role', 'query-api'])).toBe('query-api');
    expect(roleArgument([])).toBeUndefined();
  });

  it('have an npm script each, which runs the compiled service like npm start', () => {
    const scripts = JSON.parse(readFileSync('package.json', 'utf8')).scripts as Record<string, string>;
    expect(scripts.start).toBe('node bin/start.mjs');
    for (const role of ROLES.filter((role) => role !== 'all')) expect(scripts[`start:${role}`]).toBe(`node bin/start.mjs --role=${role}`);
  });
});

describe('deployment files', () => {
  it('.env.example lists every variable the configuration reads, and nothing else', () => {
    const listed = readFileSync('.env.example', 'utf8')
      .split('\n')
      .filter((line) => /^[A-Z_]+=/.test(line))
      .map((line) => line.slice(0, line.indexOf('=')));
    expect([...listed].sort()).toEqual(Object.keys(environment.shape).sort());
  });

  it('docker-compose.yml runs every process role against PostgreSQL, Redis and KurrentDB, with health checks', () => {
    const compose = readFileSync('docker-compose.yml', 'utf8');
    for (const service of ['kurrentdb:', 'postgres:', 'redis:', 'migrate:', 'command-api:', 'query-api:', 'projectors:', 'worker:', 'proxy:'])
      expect(compose).toMatch(new RegExp(`^  ${service}`, 'm'));
    for (const role of ROLES.filter((role) => role !== 'all')) expect(compose).toContain(`ROLE: ${role}`);
    // The roles share the x-engage block (image, environment, health check) and each sets its ROLE.
    expect(compose).toMatch(/^x-engage: &engage\n(?: {2}.*\n)*? {2}healthcheck:\n {4}test: .*\/healthz/m);
    expect(compose.match(/^ {4}<<: \*engage$/gm)).toHaveLength(5);
    for (const store of ['kurrentdb', 'postgres', 'redis']) expect(compose).toMatch(new RegExp(`^  ${store}:\\n(?: {4}.*\\n)*? {4}healthcheck:`, 'm'));
  });
});

describe('replay output', () => {
  it('takes its format from the file name unless told', () => {
    expect(replayFormat({ out: 'events.ndjson' })).toBe('ndjson');
    expect(replayFormat({ out: 'events.JSONL' })).toBe('ndjson');
    expect(replayFormat({ out: 'events.csv' })).toBe('csv');
    expect(replayFormat({ out: '-', format: 'csv' })).toBe('csv');
    expect(() => replayFormat({ out: 'events.txt' })).toThrow(/--format/);
  });

  it('writes CSV cells quoted only where they must be', () => {
    const line = csvLine({
      position: '0'.repeat(32),
      stream: 'user-1',
      revision: 3,
      id: 'e1',
      type: 'Noted',
      createdAt: '2026-01-01T00:00:00.000Z',
      organisationId: null,
      data: { text: 'say "hi",\nthen go' },
      metadata: {},
    });
    expect(line).toBe(`${'0'.repeat(32)},user-1,3,e1,Noted,2026-01-01T00:00:00.000Z,,"{""text"":""say \\""hi\\"",\\nthen go""}",{}\n`);
  });
});

describe('progress', () => {
  it('tells the time left at the current rate', () => {
    expect(eta(0, 0)).toBe('0s');
    expect(eta(100, 0)).toBe('-');
    expect(eta(100, 40)).toBe('3s');
    expect(eta(10_000, 50)).toBe('3m20s');
    expect(eta(1_000_000, 100)).toBe('2h46m');
  });
});
