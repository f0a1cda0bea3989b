import { domainVerificationProcess } from './domain-verification.ts';
import { engagementEngine } from './engagement-engine/index.ts';
import { engagementSchedule } from './engagement-schedule.ts';
import type { ProcessManager } from './process-manager.ts';
import { webhookDeliveries } from './webhook-deliveries.ts';

export { domainVerificationProcess, engagementEngine, engagementSchedule, webhookDeliveries };

/** Every process manager the service runs (the projector runtime drives them with the read models). */
export const processManagers: readonly ProcessManager[] = [domainVerificationProcess, engagementEngine, engagementSchedule, webhookDeliveries];
