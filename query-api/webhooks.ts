import { Router } from 'express';
import type { Kysely, Selectable } from 'kysely';
import type { ServiceContext } from '../api/context.ts';
import type { Webhook } from '../domain/webhook.ts';
import { tenantOf } from '../infra/auth.ts';
import { pageOf } from '../api/contract/common.ts';
import { deliveriesQuery, deliverySchema, webhookSchema } from '../api/contract/webhooks.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { notFound } from '../infra/http/errors.ts';
import { newestFirst, pagination } from '../infra/http/pagination.ts';
import { parse, pathId } from '../api/routes.ts';
import { minPositionHeader, readYourWrites } from './read-your-writes.ts';
import { WEBHOOKS_PROJECTION, type WebhookDeliveryRow, type WebhookRow, type WebhookTables } from '../projectors/webhooks.ts';
import { iso } from './communities.ts';
import { withTableTypes } from '../infra/database.ts';

export function webhookQueries(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();
  const db: Kysely<WebhookTables> = withTableTypes(ctx.database.db);
  const fresh = readYourWrites(db, [WEBHOOKS_PROJECTION], ctx.config.readYourWritesTimeoutMs);
  const endpointOf = async (organisationId: string, webhookId: string) => {
    const row = await db
      .selectFrom('webhooks')
      .selectAll()
      .where('organisation_id', '=', organisationId)
      .where('id', '=', webhookId)
      .where('deleted', '=', false)
      .executeTakeFirst();
    if (!row) throw notFound('Webhook not found');
    return row;
  };

  admin.route(
    router,
    {
      method: 'get',
      path: '/webhooks',
      operationId: 'listWebhooks',
      tag: 'Webhooks',
      summary: "List the organisation's webhook endpoints, newest first",
      query: pagination,
      headers: [minPositionHeader],
      responses: { 200: { description: 'A page of endpoints (without their secrets)', schema: pageOf(webhookSchema) } },
    },
    fresh,
    async (req, res) => {
      const page = parse(pagination, req.query);
      const { organisationId } = tenantOf(res);
      const { rows, totalCount } = await newestFirst(
        db.selectFrom('webhooks').where('organisation_id', '=', organisationId).where('deleted', '=', false),
        page,
      );
      res.json({ totalCount, edges: rows.map(toWebhook) });
    },
  );

  admin.route(
    router,
    {
      method: 'get',
      path: '/webhooks/:webhookId',
      operationId: 'getWebhook',
      tag: 'Webhooks',
      summary: 'Read one webhook endpoint',
      headers: [minPositionHeader],
      responses: { 200: { description: 'The endpoint (without its secret)', schema: webhookSchema } },
    },
    fresh,
    async (req, res) => {
      const { organisationId } = tenantOf(res);
      res.json(toWebhook(await endpointOf(organisationId, pathId(req.params.webhookId, 'Webhook'))));
    },
  );

  admin.route(
    router,
    {
      method: 'get',
      path: '/webhooks/:webhookId/deliveries',
      operationId: 'listWebhookDeliveries',
      tag: 'Webhooks',
      summary: "An endpoint's delivery log, newest first",
      description: 'Each delivery: the event it tells of, its attempts (status code, error, duration), the next attempt while pending, and its outcome.',
      query: deliveriesQuery,
      headers: [minPositionHeader],
      responses: { 200: { description: 'A page of deliveries', schema: pageOf(deliverySchema) } },
    },
    fresh,
    async (req, res) => {
      const { outcome, ...page } = parse(deliveriesQuery, req.query);
      const { organisationId } = tenantOf(res);
      const webhook = await endpointOf(organisationId, pathId(req.params.webhookId, 'Webhook'));
      let matching = db.selectFrom('webhook_deliveries').where('webhook_id', '=', webhook.id);
      if (outcome) matching = matching.where('outcome', '=', outcome);
      const { rows, totalCount } = await newestFirst(matching, page);
      res.json({ totalCount, edges: rows.map(toDelivery) });
    },
  );

  return router;
}

function toWebhook(row: Selectable<WebhookRow>): Webhook {
  return {
    id: row.id,
    organisationId: row.organisation_id,
    url: row.url,
    eventTypes: row.event_types,
    description: row.description,
    status: row.status,
    statusReason: row.status_reason,
    failingSince: row.failing_since && iso(row.failing_since),
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
    createdBy: row.created_by,
    updatedBy: row.updated_by,
  };
}

function toDelivery(row: Selectable<WebhookDeliveryRow>) {
  return {
    id: row.id,
    webhookId: row.webhook_id,
    messageId: row.message_id,
    eventType: row.event_type,
    payload: row.payload,
    source: row.source,
    trigger: row.trigger,
    replayId: row.replay_id,
    outcome: row.outcome,
    attemptCount: row.attempt_count,
    lastStatusCode: row.last_status_code,
    lastError: row.last_error,
    lastAttemptAt: row.last_attempt_at && iso(row.last_attempt_at),
    nextAttemptAt: row.next_attempt_at && iso(row.next_attempt_at),
    attempts: row.attempts,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}
