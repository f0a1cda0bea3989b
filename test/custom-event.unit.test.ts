import { describe, expect, it } from 'vitest';
import {
  PAYLOAD_MAX_DEPTH,
  PAYLOAD_MAX_KEYS,
  UserCreatedMeanwhile,
  autoCreateClaimDecider,
  customEventDecider,
  knownExternalUserIdDecider,
  loggedCustomEvent,
  payloadProblems,
  type CustomEventCommand,
  type CustomEventEvent,
} from '../domain/custom-event.ts';
import { fold } from '../domain/decider.ts';
import type { ExternalUserIdCommand, ExternalUserIdEvent } from '../domain/user.ts';
import { given } from './support/decider-spec.ts';

const now = '2026-03-01T12:00:00.000Z';
const base = {
  eventId: 'e'.repeat(24),
  organisationId: 'o'.repeat(24),
  communityId: 'c'.repeat(24),
  userId: 'u'.repeat(24),
  externalUserId: 'crm-42',
  name: 'purchase',
  payload: { amount: 12.5, sku: 'A-1' },
  nonce: 'n-1',
  source: { type: 'api' as const, tokenId: 't'.repeat(24) },
};
const log = (overrides: Partial<CustomEventCommand['data']> = {}): CustomEventCommand => ({ type: 'LogCustomEvent', data: { ...base, now, ...overrides } });
const logged: CustomEventEvent = { type: 'CustomEventLogged', data: { ...base, occurredAt: now } };

describe('custom event decider', () => {
  it('logs an event on a fresh stream, with every field and the time it was logged', () => {
    given(customEventDecider, []).when(log()).then([logged]);
  });

  it('logging the same event id again decides nothing (a retried link redemption)', () => {
    given(customEventDecider, [logged]).when(log()).then([]);
  });

  it('refuses another event on a stream that already holds one', () => {
    given(customEventDecider, [logged])
      .when(log({ eventId: 'f'.repeat(24) }))
      .thenRefuses('conflict', /Another event/);
  });

  it('refuses a blank name and one longer than 200 characters', () => {
    given(customEventDecider, [])
      .when(log({ name: '   ' }))
      .thenRefuses('invalid', /eventName/);
    given(customEventDecider, [])
      .when(log({ name: 'x'.repeat(201) }))
      .thenRefuses('invalid', /eventName/);
  });

  it('refuses a payload over the limits', () => {
    const wide = Object.fromEntries(Array.from({ length: PAYLOAD_MAX_KEYS + 1 }, (_, i) => [`k${i}`, i]));
    given(customEventDecider, [])
      .when(log({ payload: wide }))
      .thenRefuses('invalid', /at most 100 keys/);
  });

  it('answers with the contract fields of the logged event', () => {
    expect(loggedCustomEvent(logged.data)).toEqual({
      id: base.eventId,
      name: 'purchase',
      userId: base.userId,
      externalUserId: 'crm-42',
      payload: base.payload,
      createdAt: now,
    });
  });
});

describe('payload limits', () => {
  it('accepts an empty payload, 100 keys, and nesting 5 levels deep', () => {
    expect(payloadProblems({})).toEqual([]);
    expect(payloadProblems(Object.fromEntries(Array.from({ length: PAYLOAD_MAX_KEYS }, (_, i) => [`k${i}`, i])))).toEqual([]);
    expect(payloadProblems({ a: { b: { c: { d: { e: [1, 2] } } } } })).toEqual(['payload.a.b.c.d.e: nested deeper than 5 levels']);
    expect(payloadProblems({ a: { b: { c: { d: [1, 2] } } } })).toEqual([]);
  });

  it(`names what is nested deeper than ${PAYLOAD_MAX_DEPTH} levels`, () => {
    expect(payloadProblems({ a: { b: { c: { d: { e: { f: 1 } } } } } })).toEqual(['payload.a.b.c.d.e: nested deeper than 5 levels']);
    expect(payloadProblems({ a: [[[[[1]]]]] })).toEqual(['payload.a.0.0.0.0: nested deeper than 5 levels']);
  });

  it('limits nested objects and arrays too, and key length', () => {
    expect(payloadProblems({ list: Array.from({ length: 101 }, () => 0) })).toEqual(['payload.list: at most 100 items']);
    expect(payloadProblems({ inner: Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`k${i}`, i])) })).toEqual(['payload.inner: at most 100 keys']);
    expect(payloadProblems({ ['k'.repeat(101)]: 1 })).toEqual(['payload: keys must be 1 to 100 characters']);
    expect(payloadProblems({ '': 1 })).toEqual(['payload: keys must be 1 to 100 characters']);
  });
});

describe('resolving a user by external id inside the decision', () => {
  const claim: ExternalUserIdCommand = {
    type: 'ClaimExternalUserId',
    data: { organisationId: base.organisationId, externalUserId: 'crm-42', userId: base.userId },
  };
  const claimed: ExternalUserIdEvent = {
    type: 'ExternalUserIdClaimed',
    data: { organisationId: base.organisationId, externalUserId: 'crm-42', userId: 'a'.repeat(24) },
  };

  it('autoCreateUser claims an external id nobody has', () => {
    given(autoCreateClaimDecider, [])
      .when(claim)
      .then([{ type: 'ExternalUserIdClaimed', data: claim.data }]);
  });

  it('autoCreateUser finding the id claimed meanwhile asks to re-resolve, naming the user who has it', () => {
    const state = fold(autoCreateClaimDecider, [claimed]);
    let refusal: unknown;
    try {
      autoCreateClaimDecider.decide(claim, state);
    } catch (error) {
      refusal = error;
    }
    expect(refusal).toBeInstanceOf(UserCreatedMeanwhile);
    expect((refusal as UserCreatedMeanwhile).userId).toBe('a'.repeat(24));
  });

  it('without autoCreateUser, an unclaimed external id is "User not found"', () => {
    given(knownExternalUserIdDecider, [])
      .when(claim)
      .thenRefuses('not_found', /^User not found$/);
  });

  it('without autoCreateUser, an id claimed meanwhile asks to re-resolve', () => {
    expect(() => knownExternalUserIdDecider.decide(claim, fold(knownExternalUserIdDecider, [claimed]))).toThrow(UserCreatedMeanwhile);
  });
});
