import { Router, type Request, type Response } from 'express';
import type { RewardAssetGrant } from '../domain/engagement-events.ts';
import { organisationDecider } from '../domain/organisation.ts';
import { rewardDecider } from '../domain/reward.ts';
import { rewardAssetDecider, rewardAssetView, type RewardAssetCommand } from '../domain/reward-asset.ts';
import { tenantOf } from '../infra/auth.ts';
import { languageHeader } from '../infra/contract/localised-details.ts';
import { redeemRewardAssetBody, requestedLanguage, rewardAssetSchema, userTokenHeader } from '../infra/contract/reward-assets.ts';
import { errorBodySchema, type ApiDescription } from '../infra/http/api-description.ts';
import { notFound } from '../infra/http/errors.ts';
import { eventMetadata, parse } from '../infra/http/request-context.ts';
import { ID_PATTERN } from '../infra/ids.ts';
import { requireUser, signedInUserOf } from '../infra/require-user.ts';
import { userTokenKey } from '../infra/user-tokens.ts';
import { aggregateStream } from './command-handling.ts';
import type { ServiceContext } from './context.ts';
import { withDecidedState } from './decided-state.ts';
import { idempotencyKeyHeader } from './leaderboards.ts';
import { runCommand } from './run-command.ts';

/** The signed-in user claims, then redeems, their reward assets (integration family). */
export function rewardAssetCommands(ctx: ServiceContext, integration: ApiDescription): Router {
  const router = Router();
  const signedIn = requireUser(userTokenKey(ctx.config));
  const answers = {
    200: { description: 'The reward asset as it is now', schema: rewardAssetSchema },
    404: { description: 'No such asset for this user: unknown, another user’s or another organisation’s (`NOT_FOUND`)', schema: errorBodySchema },
  };

  integration.route(
    router,
    {
      method: 'post',
      path: '/me/reward-assets/:assetId/claim',
      operationId: 'claimMyRewardAsset',
      tag: 'Rewards',
      summary: 'Claim one of the signed-in user’s reward assets',
      description:
        'Appends `RewardAssetClaimed` on `rewardasset-<assetId>`. Claiming a claimed asset changes nothing and answers 200 with it. An expired asset (`expiresAt` passed) cannot be claimed: 409.',
      headers: [userTokenHeader, languageHeader, idempotencyKeyHeader],
      responses: { ...answers, 409: { description: 'The asset has expired (`CONFLICT`)', schema: errorBodySchema } },
    },
    signedIn,
    async (req, res) => {
      const assetId = assetIdOf(req);
      const { occurredAt } = eventMetadata(req, res);
      await decide(ctx, req, res, assetId, { type: 'ClaimRewardAsset', data: { assetId, ...owner(res), now: occurredAt! } });
    },
  );

  integration.route(
    router,
    {
      method: 'post',
      path: '/me/reward-assets/:assetId/redeem',
      operationId: 'redeemMyRewardAsset',
      tag: 'Rewards',
      summary: 'Redeem one of the signed-in user’s claimed reward assets',
      description: [
        'Appends `RewardAssetRedeemed` on `rewardasset-<assetId>`, with the information given.',
        '409: not claimed yet, already redeemed, past `redeemable.redeemByDate` (the last moment it can be redeemed) or expired. 400: a `required` item of `redeemable.additionalInformation` missing or blank (the message names its `variableConfigId`), an item the reward does not ask for, or one given twice. The body may be left out when the reward asks for nothing.',
      ].join('\n\n'),
      body: redeemRewardAssetBody,
      headers: [userTokenHeader, languageHeader, idempotencyKeyHeader],
      responses: {
        ...answers,
        409: { description: 'Not claimed, already redeemed, past its redeem-by date or expired (`CONFLICT`)', schema: errorBodySchema },
      },
    },
    signedIn,
    async (req, res) => {
      const assetId = assetIdOf(req);
      const { information } = parse(redeemRewardAssetBody, req.body ?? {});
      const { occurredAt } = eventMetadata(req, res);
      await decide(ctx, req, res, assetId, { type: 'RedeemRewardAsset', data: { assetId, ...owner(res), information, now: occurredAt! } });
    },
  );

  return router;
}

function owner(res: Response) {
  return { organisationId: tenantOf(res).organisationId, userId: signedInUserOf(res).userId };
}

/** A path id that cannot be an asset id names no asset: 404, like an unknown one. */
function assetIdOf(req: Request): string {
  const assetId = String(req.params.assetId);
  if (!ID_PATTERN.test(assetId)) throw notFound('Reward asset not found');
  return assetId.toLowerCase();
}

/**
 * Decides on the asset's stream and answers with the asset after the command, in the request's language.
 * The organisation's default language and the reward's language order (the fallbacks) come from their
 * streams, like the decision: a granted asset never changes reward.
 */
async function decide(ctx: ServiceContext, req: Request, res: Response, assetId: string, command: RewardAssetCommand) {
  const wanted = requestedLanguage(req);
  const { organisationId } = command.data;
  const [[granted], organisation] = await Promise.all([
    ctx.store.readStream(`rewardasset-${assetId}`, { limit: 1 }),
    aggregateStream(ctx.store, `organisation-${organisationId}`, organisationDecider),
  ]);
  const rewardId = (granted?.data as RewardAssetGrant | undefined)?.rewardId;
  const reward = rewardId ? await aggregateStream(ctx.store, `reward-${rewardId}`, rewardDecider) : undefined;
  const rewardLanguages = reward?.exists && reward.reward.organisationId === organisationId ? Object.keys(reward.reward.details) : [];
  const organisationDefault = organisation.settings?.defaultLanguage;
  const tracked = withDecidedState(rewardAssetDecider);
  await runCommand(ctx, req, res, {
    parts: [{ stream: `rewardasset-${assetId}`, decider: tracked.decider, command }],
    respond: ([events]) => {
      const after = tracked.after(events!);
      if (!after.exists) throw new Error('a reward asset command decided on an asset that does not exist');
      return { status: 200, body: rewardAssetView(after.asset, { wanted, organisationDefault, rewardLanguages }) };
    },
  });
}
