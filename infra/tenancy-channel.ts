/**
 * The NOTIFY channel on which the organisations projection announces each new value of
 * `public.tenancy_version` (projectors/organisations.ts), and token caches (infra/auth.ts) listen.
 */
export const TENANCY_CHANNEL = 'engage_tenancy';
