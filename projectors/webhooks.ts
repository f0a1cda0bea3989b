import type {
  DeliveryEvent,
  DeliveryOutcome,
  DeliverySource,
  WebhookEvent,
  WebhookEventType,
  WebhookPayload,
  WebhookStatus,
  WebhookStatusReason,
} from '../domain/webhook.ts';
import type { Held, Json, NullableTimestamp, Timestamp } from './columns.ts';
import { defineProjection } from './projection.ts';
import { RowBatch } from './row-batch.ts';

export const WEBHOOKS_PROJECTION = 'webhooks';

export interface WebhookRow {
  id: string;
  organisation_id: string;
  url: string;
  event_types: Json<string[]>;
  description: string | null;
  status: WebhookStatus;
  status_reason: WebhookStatusReason | null;
  failing_since: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
  created_by: string;
  updated_by: string;
  /** A deleted endpoint is kept (its deliveries may still be cancelled) but listed and found no more. */
  deleted: boolean;
}

export interface DeliveryAttempt {
  attempt: number;
  attemptedAt: string;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

export interface WebhookDeliveryRow {
  id: string;
  organisation_id: string;
  webhook_id: string;
  message_id: string;
  event_type: WebhookEventType;
  payload: Json<WebhookPayload>;
  source: Json<DeliverySource>;
  trigger: 'event' | 'replay';
  replay_id: string | null;
  outcome: DeliveryOutcome;
  attempt_count: number;
  last_status_code: number | null;
  last_error: string | null;
  last_attempt_at: NullableTimestamp;
  next_attempt_at: NullableTimestamp;
  attempts: Json<DeliveryAttempt[]>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface WebhookTables {
  webhooks: WebhookRow;
  webhook_deliveries: WebhookDeliveryRow;
}

/** The organisation's webhook endpoints and the log of their deliveries, as the admin API shows them. */
export const webhooksProjection = defineProjection<WebhookTables, WebhookEvent | DeliveryEvent>({
  name: WEBHOOKS_PROJECTION,
  version: 1,
  tables: ['webhooks', 'webhook_deliveries'],
  canHandle: [
    'WebhookCreated',
    'WebhookUpdated',
    'WebhookStatusChanged',
    'WebhookSecretRotated',
    'WebhookDeleted',
    'WebhookDeliveryRequested',
    'WebhookDeliveryAttempted',
    'WebhookDeliveryCancelled',
    'WebhookRedeliveryRequested',
  ],
  migrations: {
    '0001_webhooks': {
      async up(db) {
        await db.schema
          .createTable('webhooks')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('url', 'text', (c) => c.notNull())
          .addColumn('event_types', 'jsonb', (c) => c.notNull())
          .addColumn('description', 'text')
          .addColumn('status', 'text', (c) => c.notNull())
          .addColumn('status_reason', 'text')
          .addColumn('failing_since', 'timestamptz')
          .addColumn('created_at', 'timestamptz', (c) => c.notNull())
          .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
          .addColumn('created_by', 'text', (c) => c.notNull())
          .addColumn('updated_by', 'text', (c) => c.notNull())
          .addColumn('deleted', 'boolean', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('webhooks_by_organisation').on('webhooks').columns(['organisation_id', 'created_at desc', 'id desc']).execute();
        await db.schema
          .createTable('webhook_deliveries')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('webhook_id', 'text', (c) => c.notNull())
          .addColumn('message_id', 'text', (c) => c.notNull())
          .addColumn('event_type', 'text', (c) => c.notNull())
          .addColumn('payload', 'jsonb', (c) => c.notNull())
          .addColumn('source', 'jsonb', (c) => c.notNull())
          .addColumn('trigger', 'text', (c) => c.notNull())
          .addColumn('replay_id', 'text')
          .addColumn('outcome', 'text', (c) => c.notNull())
          .addColumn('attempt_count', 'integer', (c) => c.notNull())
          .addColumn('last_status_code', 'integer')
          .addColumn('last_error', 'text')
          .addColumn('last_attempt_at', 'timestamptz')
          .addColumn('next_attempt_at', 'timestamptz')
          .addColumn('attempts', 'jsonb', (c) => c.notNull())
          .addColumn('created_at', 'timestamptz', (c) => c.notNull())
          .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
          .execute();
        // One endpoint's deliveries newest first, all of them or of one outcome.
        await db.schema.createIndex('webhook_deliveries_by_webhook').on('webhook_deliveries').columns(['webhook_id', 'created_at desc', 'id desc']).execute();
        await db.schema
          .createIndex('webhook_deliveries_by_outcome')
          .on('webhook_deliveries')
          .columns(['webhook_id', 'outcome', 'created_at desc', 'id desc'])
          .execute();
      },
    },
  },

  /** One read of the endpoints and one of the deliveries the batch names, folded in log order, one upsert each. */
  async apply(db, events) {
    const webhooks = new RowBatch<Held<WebhookRow>>('webhooks', ['id']);
    const deliveries = new RowBatch<Held<WebhookDeliveryRow>>('webhook_deliveries', ['id']);
    await webhooks.load(
      db,
      events.filter((event) => !('deliveryId' in event.data)).map((event) => ({ id: event.data.webhookId })),
    );
    await deliveries.load(
      db,
      events.flatMap((event) => ('deliveryId' in event.data ? [{ id: event.data.deliveryId }] : [])),
    );
    for (const event of events) {
      switch (event.type) {
        case 'WebhookCreated': {
          const { data } = event;
          if (webhooks.get({ id: data.webhookId })) break;
          webhooks.set({
            id: data.webhookId,
            organisation_id: data.organisationId,
            url: data.url,
            event_types: data.eventTypes,
            description: data.description,
            status: 'enabled',
            status_reason: null,
            failing_since: null,
            created_at: data.createdAt,
            updated_at: data.createdAt,
            created_by: data.createdBy,
            updated_by: data.createdBy,
            deleted: false,
          });
          break;
        }
        case 'WebhookUpdated': {
          const row = webhooks.get({ id: event.data.webhookId });
          if (!row) break;
          const { url, eventTypes, description } = event.data.changes;
          webhooks.set({
            ...row,
            ...(url !== undefined ? { url } : {}),
            ...(eventTypes !== undefined ? { event_types: eventTypes } : {}),
            ...(description !== undefined ? { description } : {}),
            updated_at: event.data.updatedAt,
            updated_by: event.data.updatedBy,
          });
          break;
        }
        case 'WebhookStatusChanged': {
          const row = webhooks.get({ id: event.data.webhookId });
          if (!row) break;
          const { to, reason, failingSince, changedAt, changedBy } = event.data;
          webhooks.set({ ...row, status: to, status_reason: reason, failing_since: failingSince, updated_at: changedAt, updated_by: changedBy });
          break;
        }
        case 'WebhookSecretRotated': {
          const row = webhooks.get({ id: event.data.webhookId });
          if (row) webhooks.set({ ...row, updated_at: event.data.rotatedAt, updated_by: event.data.rotatedBy });
          break;
        }
        case 'WebhookDeleted': {
          const row = webhooks.get({ id: event.data.webhookId });
          if (row) webhooks.set({ ...row, deleted: true, updated_at: event.data.deletedAt, updated_by: event.data.deletedBy });
          break;
        }
        case 'WebhookDeliveryRequested': {
          const { data } = event;
          if (deliveries.get({ id: data.deliveryId })) break;
          deliveries.set({
            id: data.deliveryId,
            organisation_id: data.organisationId,
            webhook_id: data.webhookId,
            message_id: data.messageId,
            event_type: data.eventType,
            payload: data.payload,
            source: data.source,
            trigger: data.trigger,
            replay_id: data.replayId,
            outcome: 'pending',
            attempt_count: 0,
            last_status_code: null,
            last_error: null,
            last_attempt_at: null,
            next_attempt_at: data.requestedAt,
            attempts: [],
            created_at: data.requestedAt,
            updated_at: data.requestedAt,
          });
          break;
        }
        case 'WebhookDeliveryAttempted': {
          const row = deliveries.get({ id: event.data.deliveryId });
          if (!row) break;
          const { attempt, attemptedAt, statusCode, error, durationMs, outcome, nextAttemptAt } = event.data;
          deliveries.set({
            ...row,
            outcome: outcome === 'retrying' ? 'pending' : outcome,
            attempt_count: attempt,
            last_status_code: statusCode,
            last_error: error,
            last_attempt_at: attemptedAt,
            next_attempt_at: nextAttemptAt,
            attempts: [...row.attempts, { attempt, attemptedAt, statusCode, error, durationMs }],
            updated_at: attemptedAt,
          });
          break;
        }
        case 'WebhookDeliveryCancelled': {
          const row = deliveries.get({ id: event.data.deliveryId });
          if (row) deliveries.set({ ...row, outcome: 'cancelled', last_error: event.data.reason, next_attempt_at: null, updated_at: event.data.cancelledAt });
          break;
        }
        case 'WebhookRedeliveryRequested': {
          const row = deliveries.get({ id: event.data.deliveryId });
          if (row) deliveries.set({ ...row, outcome: 'pending', next_attempt_at: event.data.requestedAt, updated_at: event.data.requestedAt });
          break;
        }
      }
    }
    await webhooks.save(db);
    await deliveries.save(db);
  },
});
