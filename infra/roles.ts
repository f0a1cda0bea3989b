/**
 * Process roles. One image, one entrypoint (`main.ts`); the role picks what a process runs:
 *
 * | role          | HTTP                                  | projectors | jobs |
 * |---------------|---------------------------------------|------------|------|
 * | `all`         | the whole API + health and metrics    | yes        | yes  |
 * | `command-api` | the whole API + health and metrics    | no         | no   |
 * | `query-api`   | the whole API + health and metrics    | no         | no   |
 * | `projectors`  | health and metrics only               | yes        | no   |
 * | `worker`      | health and metrics only               | no         | yes  |
 *
 * Both API roles serve every route: which requests reach which role is the ingress's choice (by method:
 * writes to command-api, reads to query-api; see deploy/nginx.conf), so a misrouted request still works
 * and each side scales on its own. Embedded mode (no DATABASE_URL) runs `all`: one process holds the service.
 */
export const ROLES = ['all', 'command-api', 'query-api', 'projectors', 'worker'] as const;

export type Role = (typeof ROLES)[number];

export interface RolePlan {
  /** The HTTP app: the whole API, or only /healthz, /readyz and /metrics. */
  http: 'api' | 'ops';
  projectors: boolean;
  jobs: boolean;
}

export function planFor(role: Role): RolePlan {
  switch (role) {
    case 'all':
      return { http: 'api', projectors: true, jobs: true };
    case 'command-api':
    case 'query-api':
      return { http: 'api', projectors: false, jobs: false };
    case 'projectors':
      return { http: 'ops', projectors: true, jobs: false };
    case 'worker':
      return { http: 'ops', projectors: false, jobs: true };
  }
}

/** `--role=worker` or `--role worker` on the command line; undefined when absent. */
export function roleArgument(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg.startsWith('--role=')) return arg.slice('--role='.length);
    if (arg === '--role') return argv[i + 1] ?? '';
  }
  return undefined;
}
