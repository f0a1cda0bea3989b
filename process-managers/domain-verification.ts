import type { OrganisationEvent } from '../domain/organisation.ts';
import { defineProcessManager } from './process-manager.ts';
import { DOMAIN_VERIFICATION_JOB, type DomainVerificationJob } from '../domain/jobs.ts';

type DomainRegistered = Extract<OrganisationEvent, { type: 'DomainRegistered' }>;

/**
 * Process manager: every registered domain gets one verification job (DNS TXT proof for a white-label
 * domain, then provisioning). Keyed by the registration event, so replaying the log schedules nothing
 * twice and a domain registered again after removal gets a fresh job. It keeps no state.
 */
export const domainVerificationProcess = defineProcessManager<object, DomainRegistered>({
  name: 'domain_verification',
  version: 1,
  migrations: {},
  canHandle: ['DomainRegistered'],

  async handle(_db, events, context) {
    for (const event of events) {
      const { data } = event;
      const payload: DomainVerificationJob = { organisationId: data.organisationId, hostname: data.hostname, verificationToken: data.verificationToken };
      await context.schedule({
        id: `${DOMAIN_VERIFICATION_JOB}:${event.id}`,
        kind: DOMAIN_VERIFICATION_JOB,
        organisationId: data.organisationId,
        payload: { ...payload },
        dueAt: data.registeredAt,
      });
    }
  },
});
