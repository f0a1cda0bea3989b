import type { Kysely, Migration } from 'kysely';
import type { LeaderboardEvent, LeaderboardState } from '../domain/leaderboard.ts';
import { leaderboardDecider } from '../domain/leaderboard.ts';
import {
  WEBHOOK_SOURCE_EVENT_TYPES,
  leaderboardTermsOf,
  webhookMessages,
  type AssetTerms,
  type MessageLookups,
  type WebhookSourceEvent,
} from '../domain/webhook-messages.ts';
import { matchesEventTypes, type DeliveryEvent, type WebhookEvent, type WebhookStatus } from '../domain/webhook.ts';
import type { RecordedEvent, StreamAppend } from '../infra/event-store/port.ts';
import { idFrom, uuidFrom } from '../infra/ids.ts';
import type { Json } from '../projectors/columns.ts';
import { recordsetOf } from '../projectors/recordset.ts';
import { RowBatch } from '../projectors/row-batch.ts';
import { defineProcessManager, type BatchContext } from './process-manager.ts';
import { WEBHOOK_DELIVERY_JOB, WEBHOOK_REPLAY_JOB, type WebhookDeliveryJob, type WebhookReplayJob } from '../domain/jobs.ts';

export const WEBHOOK_DELIVERIES_PROCESS = 'webhook_deliveries';
interface EndpointRow {
  id: string;
  organisation_id: string;
  event_types: Json<string[]>;
  status: WebhookStatus;
  deleted: boolean;
}

/** The process manager's private state (its own schema, never exposed). */
export interface WebhookDeliveryState {
  webhook_endpoints: EndpointRow;
  webhook_leaderboards: { id: string; state: Json<LeaderboardState> };
  webhook_assets: { id: string; reward_id: string; allocation_id: string | null; community_id: string };
}

type Endpoint = { id: string; organisation_id: string; event_types: string[]; status: WebhookStatus; deleted: boolean };
const ENDPOINT_COLUMNS = ['id', 'organisation_id', 'event_types', 'status', 'deleted'] as const satisfies readonly (keyof Endpoint)[];

const migrations: Record<string, Migration> = {
  '0001_webhook_delivery_state': {
    async up(db) {
      await db.schema
        .createTable('webhook_endpoints')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('organisation_id', 'text', (c) => c.notNull())
        .addColumn('event_types', 'jsonb', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('deleted', 'boolean', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('webhook_endpoints_by_organisation').on('webhook_endpoints').column('organisation_id').execute();
      await db.schema
        .createTable('webhook_leaderboards')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('state', 'jsonb', (c) => c.notNull())
        .execute();
      await db.schema
        .createTable('webhook_assets')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('reward_id', 'text', (c) => c.notNull())
        .addColumn('allocation_id', 'text')
        .addColumn('community_id', 'text', (c) => c.notNull())
        .execute();
    },
  },
};

const LEADERBOARD_EVENTS = ['LeaderboardCreated', 'LeaderboardUpdated', 'LeaderboardStatusChanged', 'LeaderboardRewardsAssigned'] as const;

type HandledEvent =
  | Extract<WebhookEvent, { type: 'WebhookCreated' | 'WebhookUpdated' | 'WebhookStatusChanged' | 'WebhookDeleted' | 'WebhookReplayRequested' }>
  | Extract<DeliveryEvent, { type: 'WebhookDeliveryRequested' | 'WebhookDeliveryAttempted' | 'WebhookRedeliveryRequested' }>
  | LeaderboardEvent
  | WebhookSourceEvent;

/** A delivery per (endpoint, event, message); a replay's are its own, with the same `webhook-id`. */
export function deliveryIdOf(webhookId: string, eventId: string, key: string, replayId: string | null = null): string {
  return idFrom(replayId === null ? `webhookdelivery:${webhookId}:${eventId}:${key}` : `webhookdelivery:replay:${replayId}:${eventId}:${key}`);
}

/** The `webhook-id` receivers deduplicate on: one per (endpoint, event, message), whatever sends it again. */
export function messageIdOf(webhookId: string, eventId: string, key: string): string {
  return `msg_${idFrom(`webhookmessage:${webhookId}:${eventId}:${key}`)}`;
}

/**
 * The deliveries an event asks of one endpoint: a `WebhookDeliveryRequested` each, on its own stream, with
 * ids derived from the endpoint (or replay), the event and the message, so asking again appends nothing.
 */
export function deliveryRequests(
  endpoint: { id: string; organisationId: string; eventTypes: readonly string[] },
  event: RecordedEvent,
  lookups: MessageLookups,
  request: { requestedAt: string; trigger: 'event' | 'replay'; replayId: string | null },
): StreamAppend[] {
  const messages = webhookMessages(event as unknown as WebhookSourceEvent & { id: string }, lookups).filter((message) =>
    matchesEventTypes(endpoint.eventTypes, message.payload.type),
  );
  return messages.map((message) => {
    const deliveryId = deliveryIdOf(endpoint.id, event.id, message.key, request.replayId);
    const requested: DeliveryEvent = {
      type: 'WebhookDeliveryRequested',
      data: {
        deliveryId,
        webhookId: endpoint.id,
        organisationId: endpoint.organisationId,
        messageId: messageIdOf(endpoint.id, event.id, message.key),
        eventType: message.payload.type,
        payload: message.payload,
        source: { eventId: event.id, stream: event.stream, position: event.position },
        trigger: request.trigger,
        replayId: request.replayId,
        requestedAt: request.requestedAt,
      },
    };
    return {
      stream: `webhookdelivery-${deliveryId}`,
      expectedRevision: 'no_stream',
      events: [
        {
          id: uuidFrom(`webhookdelivery:${deliveryId}:requested`),
          type: requested.type,
          data: requested.data,
          metadata: {
            organisationId: endpoint.organisationId,
            actor: 'webhooks',
            causationId: event.id,
            correlationId: event.metadata.correlationId ?? event.id,
            occurredAt: request.requestedAt,
          },
        },
      ],
    };
  });
}

/** The job of a delivery's `attempt`-th attempt, due at `dueAt`. */
export function deliveryAttemptJob(data: { deliveryId: string; organisationId: string }, attempt: number, dueAt: string) {
  const job: WebhookDeliveryJob = { deliveryId: data.deliveryId, attempt };
  return {
    id: `${WEBHOOK_DELIVERY_JOB}:${data.deliveryId}:${attempt}`,
    kind: WEBHOOK_DELIVERY_JOB,
    organisationId: data.organisationId,
    payload: { ...job },
    dueAt,
  };
}

const APPENDS_PER_CALL = 500;

/**
 * Process manager for webhooks (DESIGN §4): for each domain fact of an organisation, a delivery to each of
 * its endpoints (enabled or failing) that subscribes to the fact's public type, asked for with
 * `WebhookDeliveryRequested` in the batch's transaction (so a fact is asked for once, even across crashes);
 * and the jobs those events call for: a delivery's first attempt, each retry an attempt decided, a
 * redelivery, a replay's first page. Everything it does is keyed by the events it read, so reading the log
 * again (a rebuild, another store) asks for nothing twice.
 *
 * It keeps the endpoints' subscriptions, and, to tell a placing or an asset's reward, the leaderboards (as
 * their decider folds them) and the granted assets.
 */
export const webhookDeliveries = defineProcessManager<WebhookDeliveryState, HandledEvent>({
  name: WEBHOOK_DELIVERIES_PROCESS,
  version: 1,
  migrations,
  canHandle: [
    'WebhookCreated',
    'WebhookUpdated',
    'WebhookStatusChanged',
    'WebhookDeleted',
    'WebhookReplayRequested',
    'WebhookDeliveryRequested',
    'WebhookDeliveryAttempted',
    'WebhookRedeliveryRequested',
    ...LEADERBOARD_EVENTS,
    ...WEBHOOK_SOURCE_EVENT_TYPES,
  ],

  // Most organisations have no endpoint: their facts ask for nothing, and pass by without a transaction.
  interest: () => {
    const configured = new Set<string>();
    return {
      async load(db) {
        configured.clear();
        for (const row of await db.selectFrom('webhook_endpoints').select('organisation_id').distinct().execute()) configured.add(row.organisation_id);
      },
      wants(event) {
        if (!ASKS_ONLY_FOR_DELIVERIES.has(event.type)) {
          // Once an endpoint was created, even if deleted since: never declining what could deliver.
          if (event.type === 'WebhookCreated') configured.add(event.data.organisationId);
          return true;
        }
        return configured.has(event.data.organisationId);
      },
    };
  },

  async handle(db, events, context) {
    const endpoints = await EndpointBatch.load(db, [...new Set(events.map((event) => event.data.organisationId))]);
    const leaderboards = new RowBatch<{ id: string; state: LeaderboardState }>('webhook_leaderboards', ['id']);
    await leaderboards.load(
      db,
      events.flatMap((event) => ('leaderboardId' in event.data && !('deliveryId' in event.data) ? [{ id: event.data.leaderboardId }] : [])),
    );
    const assets = new RowBatch<WebhookDeliveryState['webhook_assets']>('webhook_assets', ['id']);
    await assets.load(
      db,
      events.flatMap((event) =>
        (event.type === 'RewardAssetClaimed' || event.type === 'RewardAssetRedeemed') && endpoints.any(event.data.organisationId)
          ? [{ id: event.data.assetId }]
          : [],
      ),
    );
    const lookups: MessageLookups = {
      leaderboard: (id) => leaderboardTermsOf(leaderboards.get({ id })?.state ?? { exists: false }),
      asset: (id): AssetTerms | undefined => {
        const row = assets.get({ id });
        return row && { rewardId: row.reward_id, allocationId: row.allocation_id, communityId: row.community_id };
      },
    };
    const appends: StreamAppend[] = [];

    for (const event of events) {
      switch (event.type) {
        case 'WebhookCreated':
        case 'WebhookUpdated':
        case 'WebhookStatusChanged':
        case 'WebhookDeleted':
          endpoints.record(event);
          break;
        case 'WebhookReplayRequested': {
          const { replayId, webhookId, organisationId, fromPosition, untilPosition, from, to, requestedAt } = event.data;
          // An empty log when it was asked: nothing to replay.
          if (untilPosition === null) break;
          const job: WebhookReplayJob = { replayId, webhookId, organisationId, after: fromPosition, until: untilPosition, from, to };
          await context.schedule({
            id: `${WEBHOOK_REPLAY_JOB}:${replayId}:start`,
            kind: WEBHOOK_REPLAY_JOB,
            organisationId,
            payload: { ...job },
            dueAt: requestedAt,
          });
          break;
        }
        case 'WebhookDeliveryRequested':
          await context.schedule(deliveryAttemptJob(event.data, 1, event.data.requestedAt));
          break;
        case 'WebhookRedeliveryRequested':
          await context.schedule(deliveryAttemptJob(event.data, event.data.attempt, event.data.requestedAt));
          break;
        case 'WebhookDeliveryAttempted':
          if (event.data.nextAttemptAt !== null) await context.schedule(deliveryAttemptJob(event.data, event.data.attempt + 1, event.data.nextAttemptAt));
          break;
        case 'LeaderboardCreated':
        case 'LeaderboardUpdated':
        case 'LeaderboardStatusChanged':
        case 'LeaderboardRewardsAssigned': {
          const row = leaderboards.get({ id: event.data.leaderboardId });
          leaderboards.set({ id: event.data.leaderboardId, state: leaderboardDecider.evolve(row?.state ?? leaderboardDecider.initialState, event) });
          break;
        }
        default: {
          if (event.type === 'RewardAssetGranted') {
            const { assetId, rewardId, allocationId, communityId } = event.data;
            assets.set({ id: assetId, reward_id: rewardId, allocation_id: allocationId, community_id: communityId });
          }
          for (const endpoint of endpoints.receiving(event.data.organisationId)) {
            appends.push(
              ...deliveryRequests({ id: endpoint.id, organisationId: endpoint.organisation_id, eventTypes: endpoint.event_types }, event, lookups, {
                // The service's time of the fact (its clock), so the first attempt is due at once whatever the log's own time.
                requestedAt: event.metadata.occurredAt ?? event.createdAt.toISOString(),
                trigger: 'event',
                replayId: null,
              }),
            );
          }
        }
      }
    }

    await endpoints.save();
    await leaderboards.save(db);
    await assets.save(db);
    await appendAll(context, appends);
  },
});

/**
 * The facts whose only effect here is deliveries to their organisation's endpoints (`handle`'s default case, but
 * the grant it records): one of an organisation that never had an endpoint asks for nothing.
 */
const ASKS_ONLY_FOR_DELIVERIES: ReadonlySet<string> = new Set<string>(
  WEBHOOK_SOURCE_EVENT_TYPES.filter((type) => type !== 'RewardAssetGranted' && !(LEADERBOARD_EVENTS as readonly string[]).includes(type)),
);

async function appendAll(context: BatchContext, appends: StreamAppend[]): Promise<void> {
  for (let start = 0; start < appends.length; start += APPENDS_PER_CALL) await context.append(appends.slice(start, start + APPENDS_PER_CALL));
}

/** The endpoints of the organisations a batch names (one query), followed in log order, written back once. */
class EndpointBatch {
  private readonly changed = new Set<string>();

  private constructor(
    private readonly db: Kysely<WebhookDeliveryState>,
    private readonly byId: Map<string, Endpoint>,
  ) {}

  static async load(db: Kysely<WebhookDeliveryState>, organisationIds: string[]): Promise<EndpointBatch> {
    const rows =
      organisationIds.length === 0 ? [] : await db.selectFrom('webhook_endpoints').selectAll().where('organisation_id', 'in', organisationIds).execute();
    return new EndpointBatch(db, new Map(rows.map((row) => [row.id, row])));
  }

  any(organisationId: string): boolean {
    for (const endpoint of this.byId.values()) if (endpoint.organisation_id === organisationId && !endpoint.deleted) return true;
    return false;
  }

  /** The endpoints deliveries go to now: not deleted, not disabled. */
  *receiving(organisationId: string): Iterable<Endpoint> {
    for (const endpoint of this.byId.values()) {
      if (endpoint.organisation_id === organisationId && !endpoint.deleted && endpoint.status !== 'disabled') yield endpoint;
    }
  }

  record(event: Extract<HandledEvent, { type: 'WebhookCreated' | 'WebhookUpdated' | 'WebhookStatusChanged' | 'WebhookDeleted' }>): void {
    const { webhookId } = event.data;
    const known = this.byId.get(webhookId);
    let next: Endpoint | undefined;
    if (event.type === 'WebhookCreated') {
      if (known) return;
      next = { id: webhookId, organisation_id: event.data.organisationId, event_types: event.data.eventTypes, status: 'enabled', deleted: false };
    } else if (!known) {
      return;
    } else if (event.type === 'WebhookUpdated') {
      next = { ...known, ...(event.data.changes.eventTypes ? { event_types: event.data.changes.eventTypes } : {}) };
    } else if (event.type === 'WebhookStatusChanged') {
      next = { ...known, status: event.data.to };
    } else {
      next = { ...known, deleted: true };
    }
    this.byId.set(webhookId, next);
    this.changed.add(webhookId);
  }

  async save(): Promise<void> {
    if (this.changed.size === 0) return;
    await this.db
      .insertInto('webhook_endpoints')
      .columns(ENDPOINT_COLUMNS)
      .expression(
        await recordsetOf(
          this.db,
          'webhook_endpoints',
          ENDPOINT_COLUMNS,
          [...this.changed].map((id) => this.byId.get(id)!),
        ),
      )
      .onConflict((oc) =>
        oc
          .column('id')
          .doUpdateSet((eb) => ({ event_types: eb.ref('excluded.event_types'), status: eb.ref('excluded.status'), deleted: eb.ref('excluded.deleted') })),
      )
      .execute();
  }
}
