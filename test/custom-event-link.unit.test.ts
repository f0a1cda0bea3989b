import { describe, expect, it } from 'vitest';
import {
  LinkExpired,
  customEventLinkDecider,
  existingLink,
  redeemedEvent,
  type CustomEventLinkCommand,
  type CustomEventLinkEvent,
} from '../domain/custom-event-link.ts';
import { fold } from '../domain/decider.ts';
import { given } from './support/decider-spec.ts';

const ref = { linkId: 'l'.repeat(24), organisationId: 'o'.repeat(24) };
const definition = { communityId: 'c'.repeat(24), name: 'scanned-poster', payload: { poster: 7 }, isSingleUse: true };
const createdAt = '2026-03-01T12:00:00.000Z';
const expiresAt = '2026-03-01T13:00:00.000Z';
const create = (overrides: Partial<Extract<CustomEventLinkCommand, { type: 'CreateCustomEventLink' }>['data']> = {}): CustomEventLinkCommand => ({
  type: 'CreateCustomEventLink',
  data: { ...ref, ...definition, expiryTime: 3600, actor: 'token-1', now: createdAt, ...overrides },
});
const created = (overrides: Partial<typeof definition> = {}, expiry = expiresAt): CustomEventLinkEvent => ({
  type: 'CustomEventLinkCreated',
  data: { ...ref, ...definition, ...overrides, expiresAt: expiry, createdBy: 'token-1', createdAt },
});
const alice = { userId: 'a'.repeat(24), externalUserId: 'alice', eventId: '1'.repeat(24) };
const bob = { userId: 'b'.repeat(24), externalUserId: 'bob', eventId: '2'.repeat(24) };
const redeem = (user: typeof alice, now = '2026-03-01T12:30:00.000Z', organisationId = ref.organisationId): CustomEventLinkCommand => ({
  type: 'RedeemCustomEventLink',
  data: { ...ref, organisationId, ...user, now },
});
const redeemed = (user: typeof alice, redeemedAt = '2026-03-01T12:30:00.000Z'): CustomEventLinkEvent => ({
  type: 'CustomEventLinkRedeemed',
  data: { ...ref, ...user, redeemedAt },
});

describe('custom event link decider: creating', () => {
  it('creates a link that expires expiryTime seconds after now', () => {
    given(customEventLinkDecider, []).when(create()).then([created()]);
  });

  it('refuses to create the same link twice', () => {
    given(customEventLinkDecider, [created()])
      .when(create())
      .thenRefuses('conflict', /already exists/);
  });

  it('refuses an expiry under a second, over a year, or not whole', () => {
    for (const expiryTime of [0, 31_536_001, 1.5]) {
      given(customEventLinkDecider, [])
        .when(create({ expiryTime }))
        .thenRefuses('invalid', /expiryTime/);
    }
    given(customEventLinkDecider, [])
      .when(create({ expiryTime: 31_536_000 }))
      .then([created({}, '2027-03-01T12:00:00.000Z')]);
  });

  it('refuses a blank name and an oversized payload', () => {
    given(customEventLinkDecider, [])
      .when(create({ name: ' ' }))
      .thenRefuses('invalid', /eventName/);
    given(customEventLinkDecider, [])
      .when(create({ payload: { deep: { a: { b: { c: { d: { e: 1 } } } } } } }))
      .thenRefuses('invalid', /nested deeper/);
  });
});

describe('custom event link decider: redeeming', () => {
  it('a user redeems a live link', () => {
    given(customEventLinkDecider, [created()])
      .when(redeem(alice))
      .then([redeemed(alice)]);
  });

  it('an unknown link, or another organisation’s, is not found', () => {
    given(customEventLinkDecider, [])
      .when(redeem(alice))
      .thenRefuses('not_found', /Link not found/);
    given(customEventLinkDecider, [created()])
      .when(redeem(alice, undefined, 'p'.repeat(24)))
      .thenRefuses('not_found', /Link not found/);
  });

  it('at its expiry and after, the link is expired', () => {
    for (const now of [expiresAt, '2026-03-02T00:00:00.000Z']) {
      const decide = () => customEventLinkDecider.decide(redeem(alice, now), fold(customEventLinkDecider, [created()]));
      expect(decide).toThrow(LinkExpired);
    }
  });

  it('a second redemption by the same user decides nothing, even once the link has expired', () => {
    given(customEventLinkDecider, [created(), redeemed(alice)])
      .when(redeem(alice))
      .then([]);
    given(customEventLinkDecider, [created(), redeemed(alice)])
      .when(redeem(alice, '2026-03-05T00:00:00.000Z'))
      .then([]);
  });

  it('a single-use link refuses a second user', () => {
    given(customEventLinkDecider, [created(), redeemed(alice)])
      .when(redeem(bob))
      .thenRefuses('conflict', /single-use/);
  });

  it('a multi-use link accepts every user, once each', () => {
    given(customEventLinkDecider, [created({ isSingleUse: false }), redeemed(alice)])
      .when(redeem(bob))
      .then([redeemed(bob)]);
    given(customEventLinkDecider, [created({ isSingleUse: false }), redeemed(alice), redeemed(bob)])
      .when(redeem(bob))
      .then([]);
  });

  it('answers a redemption with the event it logged for that user', () => {
    const link = existingLink(fold(customEventLinkDecider, [created(), redeemed(alice)]), ref);
    expect(redeemedEvent(link, alice.userId)).toEqual({
      id: alice.eventId,
      name: 'scanned-poster',
      userId: alice.userId,
      externalUserId: 'alice',
      payload: { poster: 7 },
      createdAt: '2026-03-01T12:30:00.000Z',
    });
  });
});
