import { sql, type Kysely } from 'kysely';

/**
 * What the `scheduled_jobs` table says about the job queue (infra/jobs.ts): `engage jobs status` and the
 * job gauges of `/metrics` both read it, so they agree, whichever process runs the jobs.
 *
 * A pending job is `scheduled` (not due yet), `due` (due, nobody holds it) or `running` (claimed, the claim
 * not lapsed); `done` and `failed` are final. `retrying` counts pending jobs that already failed at least once.
 */
export const JOB_STATES = ['scheduled', 'due', 'running', 'done', 'failed'] as const;
export type JobState = (typeof JOB_STATES)[number];

export interface JobKindCounts {
  kind: string;
  scheduled: number;
  due: number;
  running: number;
  done: number;
  failed: number;
  retrying: number;
}

export interface JobSummary {
  kind: string;
  id: string;
  dueAt: string;
  attempts: number;
  lastError: string | null;
}

export interface JobsStatus {
  byKind: JobKindCounts[];
  /** The pending job that has been due the longest, and by how many seconds (null when nothing is due). */
  oldestDue: (JobSummary & { secondsLate: number }) | null;
  /** The latest jobs that failed for good, and pending ones whose last attempt failed (most recent first). */
  recentFailures: (JobSummary & { status: string })[];
}

export async function jobCounts(db: Kysely<any>, now: Date): Promise<JobKindCounts[]> {
  const at = now.toISOString();
  const rows = (
    await sql<{ kind: string; state: JobState; count: string; retrying: string }>`
      select kind,
        case when status <> 'pending' then status
             when locked_until is not null and locked_until > ${at}::timestamptz then 'running'
             when due_at <= ${at}::timestamptz then 'due'
             else 'scheduled' end as state,
        count(*) as count,
        count(*) filter (where status = 'pending' and attempts > 0) as retrying
      from scheduled_jobs group by 1, 2 order by 1, 2`.execute(db)
  ).rows;
  const byKind = new Map<string, JobKindCounts>();
  for (const row of rows) {
    const counts = byKind.get(row.kind) ?? { kind: row.kind, scheduled: 0, due: 0, running: 0, done: 0, failed: 0, retrying: 0 };
    if ((JOB_STATES as readonly string[]).includes(row.state)) counts[row.state] += Number(row.count);
    counts.retrying += Number(row.retrying);
    byKind.set(row.kind, counts);
  }
  return [...byKind.values()];
}

export async function jobsStatus(db: Kysely<any>, now: Date, failures = 10): Promise<JobsStatus> {
  const at = now.toISOString();
  const oldest = (
    await sql<{ id: string; kind: string; due_at: Date; attempts: number; last_error: string | null }>`
      select id, kind, due_at, attempts, last_error from scheduled_jobs
      where status = 'pending' and due_at <= ${at}::timestamptz
      order by due_at limit 1`.execute(db)
  ).rows[0];
  const failed = (
    await sql<{ id: string; kind: string; status: string; due_at: Date; attempts: number; last_error: string | null }>`
      select id, kind, status, due_at, attempts, last_error from scheduled_jobs
      where status = 'failed' or (status = 'pending' and last_error is not null)
      order by due_at desc limit ${failures}`.execute(db)
  ).rows;
  return {
    byKind: await jobCounts(db, now),
    oldestDue: oldest
      ? {
          ...summary(oldest),
          secondsLate: Math.max(0, Math.round((now.getTime() - new Date(oldest.due_at).getTime()) / 1000)),
        }
      : null,
    recentFailures: failed.map((row) => ({ ...summary(row), status: row.status })),
  };
}

function summary(row: { id: string; kind: string; due_at: Date; attempts: number; last_error: string | null }): JobSummary {
  return { kind: row.kind, id: row.id, dueAt: new Date(row.due_at).toISOString(), attempts: row.attempts, lastError: row.last_error };
}
