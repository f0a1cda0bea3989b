import { describe, expect, it } from 'vitest';
import {
  externalUserIdDecider,
  teamMember,
  userDecider,
  userOf,
  type ExternalUserIdEvent,
  type NewUserProfile,
  type UserCommand,
  type UserEvent,
  type UserProfile,
} from '../domain/user.ts';
import { given } from './support/decider-spec.ts';

const ids = { userId: 'a'.repeat(24), organisationId: 'b'.repeat(24) };
const otherOrganisation = 'c'.repeat(24);
const community = 'd'.repeat(24);
const T0 = '2026-01-01T10:00:00.000Z';
const T1 = '2026-01-02T10:00:00.000Z';
const input: NewUserProfile = {
  username: 'ada',
  displayName: 'Ada',
  email: 'ada@example.com',
  emailVerified: false,
  fullName: 'Ada Lovelace',
  parentEmail: null,
  locale: 'en',
  bio: null,
  profilePictureUrl: null,
  roles: ['member', 'member', 'captain'],
  isAnonymous: false,
  birthDay: 10,
  birthMonth: 12,
  birthYear: 1990,
  socialHandles: { instagram: '@ada', loyaltyCardNumber: null, tiktok: null },
  communityIds: [community, community],
};
const { emailVerified: _emailVerified, ...inputFields } = input;
const profile: UserProfile = { ...inputFields, roles: ['member', 'captain'], communityIds: [community], emailVerifiedAt: null };
const create = (overrides: Partial<NewUserProfile> = {}, externalUserId = 'ext-1'): UserCommand => ({
  type: 'CreateUser',
  data: { ...ids, externalUserId, profile: { ...input, ...overrides }, now: T0 },
});
const created: UserEvent = { type: 'UserCreated', data: { ...ids, externalUserId: 'ext-1', ...profile, createdAt: T0 } };
const update = (changes: Extract<UserCommand, { type: 'UpdateUser' }>['data']['changes'], organisationId = ids.organisationId): UserCommand => ({
  type: 'UpdateUser',
  data: { userId: ids.userId, organisationId, changes, now: T1 },
});
const updated = (changes: Partial<UserProfile>): UserEvent => ({ type: 'UserUpdated', data: { ...ids, changes, updatedAt: T1 } });
const setVariables = (values: { variableConfigId: string; value: string | number | boolean }[], organisationId = ids.organisationId): UserCommand => ({
  type: 'SetUserVariables',
  data: { userId: ids.userId, organisationId, values, now: T1 },
});

describe('user decider: creating', () => {
  it('creates a user, dropping duplicate roles and communities', () => {
    given(userDecider, []).when(create()).then([created]);
  });

  it('marks the address verified at creation when told so', () => {
    given(userDecider, [])
      .when(create({ emailVerified: true }))
      .then([{ type: 'UserCreated', data: { ...created.data, emailVerifiedAt: T0 } }]);
  });

  it('refuses to create one twice', () => {
    given(userDecider, [created])
      .when(create())
      .thenRefuses('conflict', /already exists/);
  });

  it('refuses a blank externalUserId', () => {
    given(userDecider, [])
      .when(create({}, '  '))
      .thenRefuses('invalid', /externalUserId/);
  });

  it('refuses a verified address without an address', () => {
    given(userDecider, [])
      .when(create({ email: null, emailVerified: true }))
      .thenRefuses('invalid', /needs an email/);
  });

  it('refuses a birthday that does not exist, but allows 29 February without a year', () => {
    given(userDecider, [])
      .when(create({ birthDay: 31, birthMonth: 4 }))
      .thenRefuses('invalid', /does not exist/);
    given(userDecider, [])
      .when(create({ birthDay: 29, birthMonth: 2, birthYear: 2023 }))
      .thenRefuses('invalid', /does not exist/);
    expect(userDecider.decide(create({ birthDay: 29, birthMonth: 2, birthYear: null }), userDecider.initialState)).toHaveLength(1);
  });
});

describe('user decider: updating', () => {
  it('records only the fields that change', () => {
    given(userDecider, [created])
      .when(update({ displayName: 'Countess', username: 'ada', bio: 'Mathematician' }))
      .then([updated({ displayName: 'Countess', bio: 'Mathematician' })]);
  });

  it('decides nothing when nothing changes', () => {
    given(userDecider, [created])
      .when(update({ username: 'ada', roles: ['member', 'captain'] }))
      .then([]);
  });

  it('merges social handles per handle, null clearing one', () => {
    given(userDecider, [created])
      .when(update({ socialHandles: { instagram: null, tiktok: '@ada' } }))
      .then([updated({ socialHandles: { instagram: null, loyaltyCardNumber: null, tiktok: '@ada' } })]);
  });

  it('unverifies a changed address', () => {
    const verified: UserEvent = updated({ emailVerifiedAt: T0 });
    given(userDecider, [created, verified])
      .when(update({ email: 'ada@lovelace.org' }))
      .then([updated({ email: 'ada@lovelace.org', emailVerifiedAt: null })]);
  });

  it('verifies an address now, keeps an earlier verification, and can unverify', () => {
    given(userDecider, [created])
      .when(update({ emailVerified: true }))
      .then([updated({ emailVerifiedAt: T1 })]);
    given(userDecider, [created, updated({ emailVerifiedAt: T0 })])
      .when(update({ emailVerified: true }))
      .then([]);
    given(userDecider, [created, updated({ emailVerifiedAt: T0 })])
      .when(update({ emailVerified: false }))
      .then([updated({ emailVerifiedAt: null })]);
    given(userDecider, [created, updated({ emailVerifiedAt: T0 })])
      .when(update({ email: 'new@example.com', emailVerified: true }))
      .then([updated({ email: 'new@example.com', emailVerifiedAt: T1 })]);
  });

  it('refuses verification once the address is cleared', () => {
    given(userDecider, [created])
      .when(update({ email: null, emailVerified: true }))
      .thenRefuses('invalid', /needs an email/);
  });

  it('checks the birthday with the parts it keeps', () => {
    given(userDecider, [created])
      .when(update({ birthMonth: 2, birthDay: 30 }))
      .thenRefuses('invalid', /does not exist/);
  });

  it('does not find a user that does not exist, or another organisation’s', () => {
    given(userDecider, [])
      .when(update({ bio: 'x' }))
      .thenRefuses('not_found', /not found/);
    given(userDecider, [created])
      .when(update({ bio: 'x' }, otherOrganisation))
      .thenRefuses('not_found', /not found/);
  });
});

describe('user decider: variables', () => {
  const tier = 'e'.repeat(24);
  const score = 'f'.repeat(24);

  it('sets the variables, ordered by variable config id', () => {
    given(userDecider, [created])
      .when(
        setVariables([
          { variableConfigId: tier, value: 'gold' },
          { variableConfigId: score, value: 3 },
        ]),
      )
      .then([{ type: 'UserVariablesSet', data: { ...ids, values: { [tier]: 'gold', [score]: 3 }, setAt: T1 } }]);
  });

  it('decides nothing when the variables are already these', () => {
    const set: UserEvent = { type: 'UserVariablesSet', data: { ...ids, values: { [tier]: 'gold' }, setAt: T0 } };
    given(userDecider, [created, set])
      .when(setVariables([{ variableConfigId: tier, value: 'gold' }]))
      .then([]);
  });

  it('refuses a variable given twice', () => {
    given(userDecider, [created])
      .when(
        setVariables([
          { variableConfigId: tier, value: 'gold' },
          { variableConfigId: tier, value: 'silver' },
        ]),
      )
      .thenRefuses('invalid', /more than once/);
  });

  it('does not find another organisation’s user', () => {
    given(userDecider, [created])
      .when(setVariables([], otherOrganisation))
      .thenRefuses('not_found', /not found/);
  });
});

describe('external user id claims', () => {
  const claim = { type: 'ClaimExternalUserId' as const, data: { organisationId: ids.organisationId, externalUserId: 'ext-1', userId: ids.userId } };
  const claimed: ExternalUserIdEvent = { type: 'ExternalUserIdClaimed', data: claim.data };

  it('claims a free external id', () => {
    given(externalUserIdDecider, []).when(claim).then([claimed]);
  });

  it('refuses an external id already claimed', () => {
    given(externalUserIdDecider, [claimed])
      .when({ ...claim, data: { ...claim.data, userId: '9'.repeat(24) } })
      .thenRefuses('conflict', /already exists/);
  });
});

describe('the team member record', () => {
  it('has every contract field, with zero points, keys, XP and one zeroed entry per community', () => {
    const member = teamMember(userOf([created].reduce(userDecider.evolve, userDecider.initialState)));
    const zeroXp = { total: 0, knowledge: 0, creativity: 0, loyalty: 0, influence: 0, participation: 0, contribution: 0 };
    expect(member).toEqual({
      id: ids.userId,
      username: 'ada',
      displayName: 'Ada',
      bio: null,
      profilePictureUrl: null,
      emailVerified: null,
      locale: 'en',
      fullName: 'Ada Lovelace',
      parentEmail: null,
      email: 'ada@example.com',
      organisationId: ids.organisationId,
      externalUserId: 'ext-1',
      createdAt: T0,
      updatedAt: T0,
      points: 0,
      keys: 0,
      xp: zeroXp,
      roles: ['member', 'captain'],
      isAnonymous: false,
      birthDay: 10,
      birthMonth: 12,
      birthYear: 1990,
      socialHandles: { instagram: '@ada', loyaltyCardNumber: null, tiktok: null },
      communityData: [
        {
          communityId: community,
          streak: { currentStreak: 0, lastExtendedAt: null, longestStreak: 0 },
          challengesCompleted: 0,
          achievementsCompleted: 0,
          points: 0,
          xp: zeroXp,
          hasAcceptedRules: false,
        },
      ],
    });
  });
});
