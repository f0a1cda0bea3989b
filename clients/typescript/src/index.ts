/**
 * A typed client of the engage API: one openapi-fetch client per family, typed by the types
 * openapi-typescript generates from the service's OpenAPI documents (`npm run client:generate`).
 *
 *   const engage = createEngageClient({ baseUrl: 'https://acme.engage.example.com', token });
 *   const { data, error } = await engage.admin.POST('/leaderboards', { body: { name: 'Weekly XP', ... } });
 *
 * Paths, parameters, bodies and answers are checked by the compiler; `error` is the contract's
 * `{message, code, issues?}` on a 4xx or 5xx.
 */
import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { paths as AdminPaths } from './admin.ts';
import type { paths as AnalyticsPaths } from './analytics.ts';
import type { paths as IntegrationPaths } from './integration.ts';

export type { AdminPaths, AnalyticsPaths, IntegrationPaths };
export type { components as AdminComponents } from './admin.ts';
export type { components as IntegrationComponents } from './integration.ts';
export type { components as AnalyticsComponents } from './analytics.ts';

export interface EngageClientOptions {
  /** The organisation's domain, with its scheme: `https://acme.engage.example.com` (the domain picks the organisation). */
  baseUrl: string;
  /** An organisation API token (`eng_<prefix>_<secret>`) with the families you call. */
  token: string;
  /** A user token (`POST /admin/users/{id}/tokens`), for the integration family's `/me` calls. */
  userToken?: string;
  /** Another fetch (tests, proxies); the global fetch by default. */
  fetch?: ClientOptions['fetch'];
}

export interface EngageClient {
  admin: Client<AdminPaths>;
  integration: Client<IntegrationPaths>;
  analytics: Client<AnalyticsPaths>;
}

export function createEngageClient(options: EngageClientOptions): EngageClient {
  const base = options.baseUrl.replace(/\/+$/, '');
  const common = {
    headers: { 'x-api-token': options.token },
    ...(options.fetch ? { fetch: options.fetch } : {}),
  };
  return {
    admin: createClient<AdminPaths>({ ...common, baseUrl: `${base}/api/v2/admin` }),
    integration: createClient<IntegrationPaths>({
      ...common,
      baseUrl: `${base}/api/v2/integration`,
      headers: { ...common.headers, ...(options.userToken ? { authorization: `Bearer ${options.userToken}` } : {}) },
    }),
    analytics: createClient<AnalyticsPaths>({ ...common, baseUrl: `${base}/api/v2/analytics` }),
  };
}
