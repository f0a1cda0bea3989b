import { describe, expect, it } from 'vitest';
import type { RewardAssetEvent, RewardAssetGrant } from '../domain/engagement-events.ts';
import { fold } from '../domain/decider.ts';
import { detailsInOrder, rewardAssetDecider, rewardAssetView, type RewardAssetCommand } from '../domain/reward-asset.ts';
import type { Redeemable } from '../domain/reward.ts';
import { given } from './support/decider-spec.ts';

const assetId = 'a'.repeat(24);
const organisationId = 'c'.repeat(24);
const userId = 'd'.repeat(24);
const email = '1'.repeat(24);
const phone = '2'.repeat(24);
const newsletter = '3'.repeat(24);
const noImages = { primaryImageUrl: '', secondaryImageUrl: '' };
const block = (title: string) => ({ title, description: '', light: noImages, dark: noImages });

const redeemable: Redeemable = {
  additionalInformation: [
    { variableConfigId: phone, required: true, position: 1 },
    { variableConfigId: email, required: true, position: 0 },
    { variableConfigId: newsletter, required: false, position: 2 },
  ],
  content: 'Show this at the desk',
  instructions: 'Book by e-mail',
  instructionsImageUrl: null,
  supportUrl: null,
  supportEmail: 'help@example.com',
  supportPhoneNumber: null,
  redeemByDate: '2026-06-30T00:00:00.000Z',
};

const grant: RewardAssetGrant = {
  organisationId,
  communityId: 'b'.repeat(24),
  userId,
  occurredAt: '2026-03-01T10:00:00.000Z',
  assetId,
  rewardId: 'e'.repeat(24),
  allocationId: 'f'.repeat(24),
  eventSourceId: 'custom-event-1',
  details: { en: block('Free coffee'), fr: block('Café offert') },
  tags: ['coffee'],
  campaigns: ['spring'],
  additionalCommunityIds: [],
  metadata: { sponsor: 'Bean Co' },
  redeemable,
  code: 'CODE-7',
  expiresAt: '2026-07-01T00:00:00.000Z',
};

const granted: RewardAssetEvent = { type: 'RewardAssetGranted', data: grant };
const claimed: RewardAssetEvent = { type: 'RewardAssetClaimed', data: { assetId, organisationId, userId, claimedAt: '2026-03-02T00:00:00.000Z' } };
const fullInformation = [
  { variableConfigId: email, value: 'me@example.com' },
  { variableConfigId: phone, value: '+33 1 00 00 00 00' },
];
const redeemed: RewardAssetEvent = {
  type: 'RewardAssetRedeemed',
  data: { assetId, organisationId, userId, redeemedAt: '2026-03-03T00:00:00.000Z', information: fullInformation },
};

const claim = (now: string, who: Partial<{ organisationId: string; userId: string }> = {}): RewardAssetCommand => ({
  type: 'ClaimRewardAsset',
  data: { assetId, organisationId, userId, now, ...who },
});
const redeem = (
  now: string,
  information: { variableConfigId: string; value: string }[] = fullInformation,
  who: Partial<{ organisationId: string; userId: string }> = {},
): RewardAssetCommand => ({ type: 'RedeemRewardAsset', data: { assetId, organisationId, userId, information, now, ...who } });

describe('reward asset decider: GrantRewardAsset', () => {
  it('grants an asset', () => {
    given(rewardAssetDecider, []).when({ type: 'GrantRewardAsset', data: grant }).then([granted]);
  });

  it('refuses to grant the same asset twice (conflict)', () => {
    given(rewardAssetDecider, [granted])
      .when({ type: 'GrantRewardAsset', data: grant })
      .thenRefuses('conflict', /already granted/);
  });

  it("the asset's content is the unit's code when it has one, else the reward's content", () => {
    const withCode = fold(rewardAssetDecider, [granted]);
    expect(withCode.exists && withCode.asset.redeemable.content).toBe('CODE-7');
    const withoutCode = fold(rewardAssetDecider, [{ type: 'RewardAssetGranted', data: { ...grant, code: null } }]);
    expect(withoutCode.exists && withoutCode.asset.redeemable.content).toBe('Show this at the desk');
    expect(withoutCode.exists && withoutCode.asset).toMatchObject({
      createdAt: grant.occurredAt,
      updatedAt: grant.occurredAt,
      claimedAt: null,
      redeemedAt: null,
    });
  });
});

describe('reward asset decider: ClaimRewardAsset', () => {
  it('claims a granted asset', () => {
    given(rewardAssetDecider, [granted]).when(claim('2026-03-02T00:00:00.000Z')).then([claimed]);
  });

  it('claiming again decides nothing (idempotent), even after expiry', () => {
    given(rewardAssetDecider, [granted, claimed]).when(claim('2026-03-05T00:00:00.000Z')).then([]);
    given(rewardAssetDecider, [granted, claimed]).when(claim('2027-01-01T00:00:00.000Z')).then([]);
  });

  it("another user's or another organisation's asset, or none, is not found", () => {
    given(rewardAssetDecider, [granted])
      .when(claim('2026-03-02T00:00:00.000Z', { userId: '9'.repeat(24) }))
      .thenRefuses('not_found', /not found/);
    given(rewardAssetDecider, [granted])
      .when(claim('2026-03-02T00:00:00.000Z', { organisationId: '9'.repeat(24) }))
      .thenRefuses('not_found', /not found/);
    given(rewardAssetDecider, [])
      .when(claim('2026-03-02T00:00:00.000Z'))
      .thenRefuses('not_found', /not found/);
  });

  it('refuses an expired asset (from expiresAt on) with a clear message', () => {
    given(rewardAssetDecider, [granted])
      .when(claim('2026-07-01T00:00:00.000Z'))
      .thenRefuses('conflict', /expired at 2026-07-01T00:00:00.000Z/);
    given(rewardAssetDecider, [granted])
      .when(claim('2026-06-30T23:59:59.999Z'))
      .then([{ type: 'RewardAssetClaimed', data: { assetId, organisationId, userId, claimedAt: '2026-06-30T23:59:59.999Z' } }]);
  });

  it('an asset without expiry can be claimed at any time', () => {
    given(rewardAssetDecider, [{ type: 'RewardAssetGranted', data: { ...grant, expiresAt: null } }])
      .when(claim('2099-01-01T00:00:00.000Z'))
      .then([{ type: 'RewardAssetClaimed', data: { assetId, organisationId, userId, claimedAt: '2099-01-01T00:00:00.000Z' } }]);
  });
});

describe('reward asset decider: RedeemRewardAsset', () => {
  it('redeems a claimed asset with every required item', () => {
    given(rewardAssetDecider, [granted, claimed]).when(redeem('2026-03-03T00:00:00.000Z')).then([redeemed]);
  });

  it('takes optional items too', () => {
    const information = [...fullInformation, { variableConfigId: newsletter, value: 'yes' }];
    given(rewardAssetDecider, [granted, claimed])
      .when(redeem('2026-03-03T00:00:00.000Z', information))
      .then([{ type: 'RewardAssetRedeemed', data: { ...redeemed.data, information } }]);
  });

  it('an asset that asks for nothing is redeemed with no information', () => {
    const plain = { ...grant, redeemable: { ...redeemable, additionalInformation: [] } };
    given(rewardAssetDecider, [{ type: 'RewardAssetGranted', data: plain }, claimed])
      .when(redeem('2026-03-03T00:00:00.000Z', []))
      .then([{ type: 'RewardAssetRedeemed', data: { ...redeemed.data, information: [] } }]);
  });

  it('must be claimed first (conflict)', () => {
    given(rewardAssetDecider, [granted])
      .when(redeem('2026-03-03T00:00:00.000Z'))
      .thenRefuses('conflict', /must be claimed/);
  });

  it('is redeemed once (conflict after)', () => {
    given(rewardAssetDecider, [granted, claimed, redeemed])
      .when(redeem('2026-03-04T00:00:00.000Z'))
      .thenRefuses('conflict', /already redeemed at 2026-03-03T00:00:00.000Z/);
  });

  it('after redeemByDate (conflict); at that very moment it still can', () => {
    given(rewardAssetDecider, [granted, claimed])
      .when(redeem('2026-06-30T00:00:00.001Z'))
      .thenRefuses('conflict', /redeemed by 2026-06-30T00:00:00.000Z/);
    given(rewardAssetDecider, [granted, claimed])
      .when(redeem('2026-06-30T00:00:00.000Z'))
      .then([{ type: 'RewardAssetRedeemed', data: { ...redeemed.data, redeemedAt: '2026-06-30T00:00:00.000Z' } }]);
  });

  it('after expiresAt (conflict)', () => {
    const noRedeemBy = { ...grant, redeemable: { ...redeemable, redeemByDate: null } };
    given(rewardAssetDecider, [{ type: 'RewardAssetGranted', data: noRedeemBy }, claimed])
      .when(redeem('2026-07-01T00:00:00.000Z'))
      .thenRefuses('conflict', /expired at 2026-07-01T00:00:00.000Z/);
  });

  it('a missing required item is invalid, naming each missing variableConfigId in position order', () => {
    given(rewardAssetDecider, [granted, claimed])
      .when(redeem('2026-03-03T00:00:00.000Z', [{ variableConfigId: email, value: 'me@example.com' }]))
      .thenRefuses('invalid', new RegExp(`missing: ${phone}$`));
    given(rewardAssetDecider, [granted, claimed])
      .when(redeem('2026-03-03T00:00:00.000Z', []))
      .thenRefuses('invalid', new RegExp(`missing: ${email}, ${phone}$`));
    given(rewardAssetDecider, [granted, claimed])
      .when(
        redeem('2026-03-03T00:00:00.000Z', [
          { variableConfigId: email, value: '  ' },
          { variableConfigId: phone, value: '1' },
        ]),
      )
      .thenRefuses('invalid', new RegExp(`missing: ${email}$`));
  });

  it('an item the reward does not ask for, or one given twice, is invalid', () => {
    given(rewardAssetDecider, [granted, claimed])
      .when(redeem('2026-03-03T00:00:00.000Z', [...fullInformation, { variableConfigId: '4'.repeat(24), value: 'x' }]))
      .thenRefuses('invalid', /not asked for/);
    given(rewardAssetDecider, [granted, claimed])
      .when(redeem('2026-03-03T00:00:00.000Z', [...fullInformation, { variableConfigId: email, value: 'again@example.com' }]))
      .thenRefuses('invalid', /given twice/);
  });

  it("another user's asset is not found, before anything else", () => {
    given(rewardAssetDecider, [granted])
      .when(redeem('2026-03-03T00:00:00.000Z', [], { userId: '9'.repeat(24) }))
      .thenRefuses('not_found', /not found/);
  });
});

describe('reward asset state and view', () => {
  it('claim and redemption move claimedAt, redeemedAt and updatedAt', () => {
    const state = fold(rewardAssetDecider, [granted, claimed, redeemed]);
    expect(state.exists && state.asset).toMatchObject({
      createdAt: '2026-03-01T10:00:00.000Z',
      claimedAt: '2026-03-02T00:00:00.000Z',
      redeemedAt: '2026-03-03T00:00:00.000Z',
      updatedAt: '2026-03-03T00:00:00.000Z',
    });
  });

  it("orders details by the reward's languages, then the rest alphabetically", () => {
    const details = { en: block('en'), 'pt-PT': block('pt'), de: block('de'), fr: block('fr') };
    expect(detailsInOrder(details, ['pt-pt', 'fr']).map((d) => d.language)).toEqual(['pt-PT', 'fr', 'de', 'en']);
  });

  it("views one details block: the wanted language, its primary subtag, the organisation's default, then the reward's first", () => {
    const state = fold(rewardAssetDecider, [granted]);
    if (!state.exists) throw new Error('granted');
    const view = (wanted: string | undefined, organisationDefault: string | undefined, rewardLanguages: string[] = ['fr', 'en']) =>
      rewardAssetView(state.asset, { wanted, organisationDefault, rewardLanguages }).details.title;
    expect(view('en', 'fr')).toBe('Free coffee');
    expect(view('fr-CA', 'en')).toBe('Café offert');
    expect(view('de', 'en')).toBe('Free coffee');
    expect(view('de', 'es')).toBe('Café offert');
    expect(view(undefined, 'es', ['en', 'fr'])).toBe('Free coffee');
  });
});
