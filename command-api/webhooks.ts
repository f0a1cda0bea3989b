import { randomBytes } from 'node:crypto';
import { Router, type Request } from 'express';
import { deliveryDecider, webhookDecider, webhookView, type DeliveryEvent, type WebhookCommand, type WebhookEvent } from '../domain/webhook.ts';
import { tenantOf } from '../infra/auth.ts';
import {
  createWebhookBody,
  redeliverySchema,
  replayWebhookBody,
  updateWebhookBody,
  webhookReplaySchema,
  webhookSchema,
  webhookWithSecretSchema,
} from '../api/contract/webhooks.ts';
import { errorBodySchema, type ApiDescription } from '../api/api-description.ts';
import { badRequest, notFound } from '../infra/http/errors.ts';
import { eventMetadata, idempotencyKeyHeader, parse, pathId } from '../api/routes.ts';
import { ID_PATTERN, newId } from '../infra/ids.ts';
import { userTokenKey } from '../infra/user-tokens.ts';
import { webhookSecret, webhookUrlProblem } from '../infra/webhook-sender.ts';
import type { ServiceContext } from '../api/context.ts';
import { withDecidedState } from './decided-state.ts';
import { runCommand } from './run-command.ts';

const notFoundResponse = { description: 'No webhook with this id in the organisation (`NOT_FOUND`)', schema: errorBodySchema };

export function webhookCommands(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();
  const serverKey = userTokenKey(ctx.config);
  /** The answer with the secret: derived again from the key id the recorded answer holds, so the log never holds the secret. */
  const revealSecret = ({ secretKeyId, ...webhook }: { secretKeyId: string; id: string }) => ({
    ...webhook,
    secret: webhookSecret(serverKey, webhook.id, secretKeyId),
  });
  const checkUrl = (url: string | undefined) => {
    const problem = url === undefined ? null : webhookUrlProblem(url, ctx.config.webhookAllowPrivateAddresses);
    if (problem) throw badRequest([{ message: problem, path: ['body', 'url'] }]);
  };
  /** Decide one command on the endpoint's stream and answer with the endpoint as it leaves it. */
  const onWebhook = (req: Request, res: Parameters<typeof runCommand>[2], command: WebhookCommand, status: number, reveal?: boolean) => {
    const webhook = withDecidedState(webhookDecider);
    return runCommand(ctx, req, res, {
      // A new endpoint's id is made for its command: its stream is decided unread.
      parts: [{ stream: `webhook-${command.data.webhookId}`, newStream: command.type === 'CreateWebhook', decider: webhook.decider, command }],
      respond: ([events]) => {
        const view = webhookView(webhook.after(events!));
        const secretKeyId = (events as WebhookEvent[]).flatMap((event) => ('secretKeyId' in event.data ? [event.data.secretKeyId] : []))[0];
        return { status, body: reveal ? { ...view, secretKeyId } : view };
      },
      ...(reveal ? { reveal: revealSecret } : {}),
    });
  };

  admin.route(
    router,
    {
      method: 'post',
      path: '/webhooks',
      operationId: 'createWebhook',
      tag: 'Webhooks',
      summary: 'Register a webhook endpoint',
      description:
        'Appends `WebhookCreated` on `webhook-<id>`. From the next fact of the log on, every event of a subscribed type is POSTed to `url`, signed ' +
        '(Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature`). The answer holds the signing `secret`: it is shown now and ' +
        'on rotation only. A URL whose host is a private, loopback or link-local address is a 400 unless the operator allows such addresses.',
      body: createWebhookBody,
      example: { url: 'https://hooks.example.com/engage', eventTypes: ['achievement.earned', 'reward_asset.*'], description: 'CRM sync' },
      headers: [idempotencyKeyHeader],
      responses: { 201: { description: 'The endpoint, with its signing secret', schema: webhookWithSecretSchema } },
    },
    async (req, res) => {
      const body = parse(createWebhookBody, req.body);
      checkUrl(body.url);
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      const command: WebhookCommand = {
        type: 'CreateWebhook',
        data: { ...body, webhookId: newId(), organisationId, secretKeyId: randomBytes(16).toString('hex'), actor: actor!, now: occurredAt! },
      };
      await onWebhook(req, res, command, 201, true);
    },
  );

  admin.route(
    router,
    {
      method: 'patch',
      path: '/webhooks/:webhookId',
      operationId: 'updateWebhook',
      tag: 'Webhooks',
      summary: 'Change a webhook endpoint: its URL, event types, description or status',
      description:
        'Appends `WebhookUpdated` (changed fields) and/or `WebhookStatusChanged`. `status: "disabled"` stops deliveries (pending ones are cancelled ' +
        'when due); `"enabled"` starts them again for new events and forgives past failures (a `replay` sends what was missed).',
      body: updateWebhookBody,
      headers: [idempotencyKeyHeader],
      responses: { 200: { description: 'The endpoint after the change', schema: webhookSchema }, 404: notFoundResponse },
    },
    async (req, res) => {
      const webhookId = webhookIdOf(req);
      const { status, ...changes } = parse(updateWebhookBody, req.body);
      checkUrl(changes.url);
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      await onWebhook(
        req,
        res,
        { type: 'UpdateWebhook', data: { webhookId, organisationId, changes, ...(status ? { status } : {}), actor: actor!, now: occurredAt! } },
        200,
      );
    },
  );

  admin.route(
    router,
    {
      method: 'delete',
      path: '/webhooks/:webhookId',
      operationId: 'deleteWebhook',
      tag: 'Webhooks',
      summary: 'Delete a webhook endpoint',
      description: 'Appends `WebhookDeleted`: nothing more is delivered to it (pending deliveries are cancelled when due), and it is not found any more.',
      responses: { 204: { description: 'Deleted' }, 404: notFoundResponse },
    },
    async (req, res) => {
      const webhookId = webhookIdOf(req);
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      await runCommand(ctx, req, res, {
        parts: [
          {
            stream: `webhook-${webhookId}`,
            decider: webhookDecider,
            command: { type: 'DeleteWebhook', data: { webhookId, organisationId, actor: actor!, now: occurredAt! } },
          },
        ],
        respond: () => ({ status: 204, body: null }),
      });
    },
  );

  admin.route(
    router,
    {
      method: 'post',
      path: '/webhooks/:webhookId/rotate-secret',
      operationId: 'rotateWebhookSecret',
      tag: 'Webhooks',
      summary: 'Give a webhook endpoint a new signing secret',
      description:
        'Appends `WebhookSecretRotated`. For 24 hours every message carries two signatures (`v1,<new> v1,<previous>`), so a receiver verifying ' +
        'with either secret accepts it while it switches.',
      headers: [idempotencyKeyHeader],
      responses: { 200: { description: 'The endpoint, with its new secret (shown this once)', schema: webhookWithSecretSchema }, 404: notFoundResponse },
    },
    async (req, res) => {
      const webhookId = webhookIdOf(req);
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      const command: WebhookCommand = {
        type: 'RotateWebhookSecret',
        data: { webhookId, organisationId, secretKeyId: randomBytes(16).toString('hex'), actor: actor!, now: occurredAt! },
      };
      await onWebhook(req, res, command, 200, true);
    },
  );

  admin.route(
    router,
    {
      method: 'post',
      path: '/webhooks/:webhookId/deliveries/:deliveryId/redeliver',
      operationId: 'redeliverWebhookDelivery',
      tag: 'Webhooks',
      summary: 'Send a delivery again',
      description:
        'Appends `WebhookRedeliveryRequested` on `webhookdelivery-<id>`: the message (same body, same `webhook-id`) is attempted again at once, ' +
        'with a fresh cycle of retries. A delivery still pending is a 409; so is a disabled endpoint.',
      headers: [idempotencyKeyHeader],
      responses: {
        202: { description: 'Asked for: the delivery log shows the new attempts', schema: redeliverySchema },
        404: { description: 'No such webhook or delivery (`NOT_FOUND`)', schema: errorBodySchema },
        409: { description: 'The delivery is still pending, or the endpoint is disabled (`CONFLICT`)', schema: errorBodySchema },
      },
    },
    async (req, res) => {
      const webhookId = webhookIdOf(req);
      const deliveryId = String(req.params.deliveryId).toLowerCase();
      if (!ID_PATTERN.test(deliveryId)) throw notFound('Delivery not found');
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      await runCommand(ctx, req, res, {
        parts: [
          { stream: `webhook-${webhookId}`, decider: webhookDecider, command: { type: 'RequireDeliverableWebhook', data: { webhookId, organisationId } } },
          {
            stream: `webhookdelivery-${deliveryId}`,
            decider: deliveryDecider,
            command: { type: 'RequestRedelivery', data: { webhookId, organisationId, actor: actor!, now: occurredAt! } },
          },
        ],
        respond: ([, events]) => {
          const [requested] = events as DeliveryEvent[];
          if (requested?.type !== 'WebhookRedeliveryRequested') throw new Error('RequestRedelivery decided no WebhookRedeliveryRequested');
          const { attempt, requestedAt } = requested.data;
          return { status: 202, body: { deliveryId, webhookId, attempt, requestedAt } };
        },
      });
    },
  );

  admin.route(
    router,
    {
      method: 'post',
      path: '/webhooks/:webhookId/replay',
      operationId: 'replayWebhook',
      tag: 'Webhooks',
      summary: 'Send every matching event of the log again, since a point',
      description:
        'Appends `WebhookReplayRequested`; a job then reads the log from `fromPosition` (exclusive; else the start) to its head as it is now, ' +
        'page by page, and asks for a delivery of every event of the organisation the endpoint subscribes to now (recorded in `[from, to)` when ' +
        'given), including events older than the endpoint. Each keeps its `webhook-id`, so a receiver that has it can tell. A disabled endpoint is a 409.',
      body: replayWebhookBody,
      example: { from: '2026-01-05T00:00:00Z' },
      headers: [idempotencyKeyHeader],
      responses: {
        202: { description: 'The replay, under way', schema: webhookReplaySchema },
        404: notFoundResponse,
        409: { description: 'The endpoint is disabled (`CONFLICT`)', schema: errorBodySchema },
      },
    },
    async (req, res) => {
      const webhookId = webhookIdOf(req);
      const body = parse(replayWebhookBody, req.body ?? {});
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      const replay = {
        replayId: newId(),
        fromPosition: body.fromPosition ?? null,
        from: body.from ?? null,
        to: body.to ?? null,
        untilPosition: (await ctx.store.head())?.position ?? null,
      };
      await runCommand(ctx, req, res, {
        parts: [
          {
            stream: `webhook-${webhookId}`,
            decider: webhookDecider,
            command: { type: 'RequestWebhookReplay', data: { webhookId, organisationId, ...replay, actor: actor!, now: occurredAt! } },
          },
        ],
        respond: () => ({ status: 202, body: { ...replay, webhookId, requestedAt: occurredAt! } }),
      });
    },
  );

  return router;
}

/** A path id that cannot be a webhook's is simply not found. */
export function webhookIdOf(req: Request): string {
  return pathId(req.params.webhookId, 'Webhook');
}
