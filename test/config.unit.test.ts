import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../infra/config.ts';
import { formatPosition, parsePosition } from '../infra/event-store/port.ts';
import { hostnameOf } from '../infra/auth.ts';

describe('configuration', () => {
  it('defaults to embedded mode on port 3000 with localhost subdomains', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 3000,
      databaseUrl: undefined,
      redisUrl: undefined,
      platformDomain: 'localhost',
      eventStore: 'postgres',
      bodyLimit: '1mb',
    });
    expect(config.dataDir.endsWith('.data')).toBe(true);
  });

  it('names every bad variable', () => {
    let error: unknown;
    try {
      loadConfig({ PORT: '70000', DATABASE_URL: 'mysql://x', REDIS_URL: 'http://x', LOG_LEVEL: 'loud', EVENT_STORE: 'kafka' });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.join('\n');
    for (const variable of ['PORT', 'DATABASE_URL', 'REDIS_URL', 'LOG_LEVEL', 'EVENT_STORE']) expect(problems).toContain(`${variable}:`);
  });

  it('reads rate limits and the trusted proxies, with documented defaults', () => {
    expect(loadConfig({})).toMatchObject({
      rateLimits: { windowSeconds: 60, apiTokenRequests: 300, userTokenRequests: 60, failedAuthentications: 20 },
      trustProxy: 'loopback',
    });
    expect(loadConfig({ TRUST_PROXY: 'loopback,uniquelocal, 10.0.0.0/8, ::1' }).trustProxy).toBe('loopback, uniquelocal, 10.0.0.0/8, ::1');
    for (const env of [
      { TRUST_PROXY: 'true' },
      { TRUST_PROXY: '10.0.0.0/33' },
      { RATE_LIMIT_API_TOKEN_REQUESTS: '0' },
      { RATE_LIMIT_WINDOW_SECONDS: 'soon' },
    ]) {
      expect(() => loadConfig(env), JSON.stringify(env)).toThrow(new RegExp(`${Object.keys(env)[0]}:`));
    }
  });

  it('sends webhooks to public addresses only, unless the operator allows private ones', () => {
    expect(loadConfig({}).webhookAllowPrivateAddresses).toBe(false);
    expect(loadConfig({ WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'true' }).webhookAllowPrivateAddresses).toBe(true);
    expect(() => loadConfig({ WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'yes' })).toThrow(/WEBHOOK_ALLOW_PRIVATE_ADDRESSES:/);
  });

  it("bounds V8's heap growth to 50% by default; 0 leaves it to V8", () => {
    expect(loadConfig({}).heapGrowingPercent).toBe(50);
    expect(loadConfig({ HEAP_GROWING_PERCENT: '0' }).heapGrowingPercent).toBe(0);
    expect(() => loadConfig({ HEAP_GROWING_PERCENT: '-5' })).toThrow(/HEAP_GROWING_PERCENT:/);
  });

  it('needs a KurrentDB connection string to use KurrentDB', () => {
    expect(() => loadConfig({ EVENT_STORE: 'kurrentdb' })).toThrow(/KURRENTDB_CONNECTION_STRING/);
  });
});

describe('positions and hosts', () => {
  it('positions compare as strings in log order', () => {
    const positions = [formatPosition(1n, 900n), formatPosition(2n, 5n), formatPosition(2n, 6n), formatPosition(16n, 1n)];
    expect([...positions].sort()).toEqual(positions);
    expect(parsePosition(positions[3]!)).toEqual({ major: 16n, minor: 1n });
    expect(() => parsePosition('12')).toThrow(RangeError);
  });

  it('reads the hostname out of a Host header', () => {
    expect(hostnameOf('Acme.Localhost:3000')).toBe('acme.localhost');
    expect(hostnameOf('acme.example.com.')).toBe('acme.example.com');
    expect(hostnameOf('[::1]:3000')).toBe('[::1]');
    expect(hostnameOf(undefined)).toBeNull();
  });
});
