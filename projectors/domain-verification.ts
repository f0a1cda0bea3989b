import type { OrganisationEvent } from '../domain/organisation.ts';
import { scheduleJob } from '../infra/jobs.ts';
import type { LegacyProjection as Projection } from './legacy.ts';

export const DOMAIN_VERIFICATION_JOB = 'domain-verification';

export interface DomainVerificationJob {
  organisationId: string;
  hostname: string;
  verificationToken: string;
}

/**
 * Process manager: every registered domain gets one verification job (DNS TXT proof for a white-label
 * domain, then provisioning). Keyed by the registration event, so replaying the log schedules nothing
 * twice and a domain registered again after removal gets a fresh job.
 */
export const domainVerificationProcess: Projection = {
  name: 'domain_verification',
  version: 1,
  tables: [],
  migrations: {},
  filter: { categories: ['organisation'], eventTypes: ['DomainRegistered'] },

  async apply(db, event) {
    const { type, data } = event as unknown as OrganisationEvent;
    if (type !== 'DomainRegistered') return;
    const payload: DomainVerificationJob = { organisationId: data.organisationId, hostname: data.hostname, verificationToken: data.verificationToken };
    await scheduleJob(db, {
      id: `${DOMAIN_VERIFICATION_JOB}:${event.id}`,
      kind: DOMAIN_VERIFICATION_JOB,
      organisationId: data.organisationId,
      payload: { ...payload },
      dueAt: data.registeredAt,
    });
  },
};
