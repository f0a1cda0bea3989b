import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
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
  const composeText = readFileSync('docker-compose.yml', 'utf8');
  const compose = parseYaml(composeText, { merge: true }) as { services: Record<string, ComposeService> };
  const services = compose.services;
  const engageRoles = ['migrate', 'cli', 'command-api', 'query-api', 'projectors', 'worker'];
  /** `${NAME...}` interpolations in docker-compose.yml, with what follows the name (`:-default`, `:?message`). */
  const interpolations = [...composeText.matchAll(/\$\{([A-Z_]+)([^}]*)\}/g)].map(([, name, rest]) => ({ name: name!, rest: rest! }));

  it('.env.example lists every variable the configuration reads and docker compose interpolates, and nothing else', () => {
    const listed = readFileSync('.env.example', 'utf8')
      .split('\n')
      .filter((line) => /^[A-Z_]+=/.test(line))
      .map((line) => line.slice(0, line.indexOf('=')));
    const expected = new Set([...Object.keys(environment.shape), ...interpolations.map(({ name }) => name), 'COMPOSE_PROFILES']);
    expect([...listed].sort()).toEqual([...expected].sort());
  });

  it('docker-compose.yml runs every process role against PostgreSQL and Redis, KurrentDB only under its profile', () => {
    for (const service of ['postgres', 'redis', 'kurrentdb', 'proxy', 'prometheus', 'grafana', ...engageRoles])
      expect(Object.keys(services)).toContain(service);
    for (const role of ROLES.filter((role) => role !== 'all')) expect(services[role]!.environment!.ROLE).toBe(role);
    // The engage services share the x-engage block (image, environment) and each sets its ROLE.
    expect(composeText.match(/^ {4}<<: \*engage$/gm)).toHaveLength(engageRoles.length);
    for (const store of ['kurrentdb', 'postgres', 'redis']) expect(services[store]!.healthcheck?.test, store).toBeDefined();
    expect(services.kurrentdb!.profiles).toEqual(['kurrentdb']);
    for (const role of engageRoles) {
      expect(services[role]!.depends_on!.postgres).toEqual({ condition: 'service_healthy' });
      // Waits for KurrentDB only when its profile runs it (EVENT_STORE=kurrentdb).
      expect(services[role]!.depends_on!.kurrentdb).toEqual({ condition: 'service_healthy', required: false });
    }
  });

  it('docker-compose.yml has no default secret: compose refuses to start without them, naming the variable', () => {
    const secrets = interpolations.filter(({ name }) => /PASSWORD|SECRET|TOKEN|KEY/.test(name));
    expect(new Set(secrets.map(({ name }) => name))).toEqual(new Set(['POSTGRES_PASSWORD', 'USER_TOKEN_SECRET', 'GRAFANA_ADMIN_PASSWORD']));
    for (const { name, rest } of secrets.filter(({ name }) => name !== 'GRAFANA_ADMIN_PASSWORD')) {
      expect(rest, name).toMatch(new RegExp(`^:\\?.*\\b${name}\\b`));
    }
    // Grafana's is optional to compose (its profile may be off) and required by Grafana's entrypoint instead.
    expect(interpolations.filter(({ name }) => name === 'GRAFANA_ADMIN_PASSWORD').map(({ rest }) => rest)).toEqual([':-']);
    expect(services.grafana!.entrypoint!.join(' ')).toMatch(/-z "\$\$GF_SECURITY_ADMIN_PASSWORD".*GRAFANA_ADMIN_PASSWORD is not set.*exit 1/);
    expect(services.grafana!.environment!.GF_SECURITY_ADMIN_PASSWORD).toBe('${GRAFANA_ADMIN_PASSWORD:-}');
  });

  it('docker-compose.yml publishes only the proxy (and Grafana on loopback under its profile), with pinned images', () => {
    const published = Object.entries(services).filter(([, service]) => service.ports);
    expect(published.map(([name]) => name).sort()).toEqual(['grafana', 'proxy']);
    expect(services.proxy!.ports).toEqual(['8080:80']);
    expect(services.grafana!.ports!.every((port) => port.startsWith('127.0.0.1:'))).toBe(true);
    expect(services.grafana!.profiles).toEqual(['observability']);
    for (const [name, service] of Object.entries(services)) {
      if (service.image === 'engage:local') continue;
      // An exact release or a digest; never `latest` or a moving major or minor (PostgreSQL's releases are major.minor).
      const release = service.image!.startsWith('postgres:') ? /:\d+\.\d+$/ : /:v?\d+\.\d+\.\d+(-[\w.-]+)?$/;
      expect(service.image!.match(release) ?? service.image!.match(/@sha256:[0-9a-f]{64}$/), `${name}: ${service.image}`).not.toBeNull();
    }
  });

  it('docker-compose.yml runs the CLI inside the stack and provisions Prometheus and Grafana from deploy/', () => {
    expect(services.cli).toMatchObject({ profiles: ['cli'], entrypoint: ['node', 'dist/cli/engage.js'], restart: 'no' });
    expect(services.migrate!.command).toEqual(['node', 'dist/cli/engage.js', 'migrate']);
    expect(services.prometheus!.profiles).toEqual(['observability']);
    for (const service of ['proxy', 'prometheus', 'grafana']) {
      for (const volume of services[service]!.volumes!.filter((v) => v.startsWith('./'))) expect(existsSync(volume.split(':')[0]!), volume).toBe(true);
    }
    const prometheus = parseYaml(readFileSync('deploy/prometheus/prometheus.yml', 'utf8'));
    const mounted = services.prometheus!.volumes!.map((volume) => volume.split(':')[1]);
    for (const rules of prometheus.rule_files as string[]) expect(mounted).toContain(rules);
    expect(prometheus.scrape_configs[0].dns_sd_configs[0].names.sort()).toEqual(ROLES.filter((role) => role !== 'all').sort());
  });

  it('the image builds compiled code on a supported Node LTS, runs it as a non-root user with a health check', () => {
    const dockerfile = readFileSync('Dockerfile', 'utf8');
    const stages = [...dockerfile.matchAll(/^FROM (\S+)(?: AS (\w+))?$/gm)];
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const base = dockerfile.match(/^ARG NODE_IMAGE=(\S+)$/m)?.[1];
    expect(base).toMatch(/^node:(22|24)\.\d+\.\d+-[\w-]+@sha256:[0-9a-f]{64}$/);
    const final = dockerfile.slice(stages[stages.length - 1]!.index);
    expect(final).toContain('npm ci --omit=dev');
    expect(final).toMatch(/^COPY --from=build \/app\/dist \.\/dist$/m);
    expect(final).toMatch(/^USER node$/m);
    expect(final).toMatch(/^HEALTHCHECK .*\n?.*\/healthz/m);
    expect(final).toMatch(/^CMD \["node", "dist\/main\.js"\]$/m);
    expect(final).not.toMatch(/tsx/);
  });

  it('.env, where the secrets go, is ignored by git and kept out of the image', () => {
    for (const file of ['.gitignore', '.dockerignore']) expect(readFileSync(file, 'utf8').split('\n'), file).toContain('.env');
  });
});

interface ComposeService {
  image?: string;
  profiles?: string[];
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition: string; required?: boolean }>;
  healthcheck?: { test?: string[] };
  ports?: string[];
  volumes?: string[];
  entrypoint?: string[];
  command?: string[];
  restart?: string;
}

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
