import { DomainError, type Decider, type DomainEvent } from './decider.ts';
import type { VariableValue } from './variable-config.ts';

export interface SocialHandles {
  instagram: string | null;
  loyaltyCardNumber: string | null;
  tiktok: string | null;
}

/** What an organisation knows about one of its users; every field the team member record shows. */
export interface UserProfile {
  username: string | null;
  displayName: string | null;
  email: string | null;
  /** When the e-mail address was verified; null while it is not. */
  emailVerifiedAt: string | null;
  fullName: string | null;
  parentEmail: string | null;
  locale: string | null;
  bio: string | null;
  profilePictureUrl: string | null;
  roles: string[];
  isAnonymous: boolean;
  birthDay: number | null;
  birthMonth: number | null;
  birthYear: number | null;
  socialHandles: SocialHandles;
  communityIds: string[];
}

/** A new user's profile as a client gives it: `emailVerified` true marks the address verified now. */
export type NewUserProfile = Omit<UserProfile, 'emailVerifiedAt'> & { emailVerified: boolean };

/** A profile with nothing but its community: the user a custom event creates (`autoCreateUser`). */
export function blankProfile(communityId: string): NewUserProfile {
  return {
    username: null,
    displayName: null,
    email: null,
    emailVerified: false,
    fullName: null,
    parentEmail: null,
    locale: null,
    bio: null,
    profilePictureUrl: null,
    roles: [],
    isAnonymous: false,
    birthDay: null,
    birthMonth: null,
    birthYear: null,
    socialHandles: { instagram: null, loyaltyCardNumber: null, tiktok: null },
    communityIds: [communityId],
  };
}

/** A partial update; `socialHandles` merges per handle (null clears one), lists replace. */
export type UserProfileChanges = Partial<Omit<UserProfile, 'emailVerifiedAt' | 'socialHandles' | 'isAnonymous'>> & {
  socialHandles?: Partial<SocialHandles>;
  emailVerified?: boolean;
};

export interface User extends UserProfile {
  id: string;
  organisationId: string;
  externalUserId: string;
  createdAt: string;
  updatedAt: string;
}

export type UserEvent =
  | DomainEvent<'UserCreated', UserProfile & { userId: string; organisationId: string; externalUserId: string; createdAt: string }>
  | DomainEvent<'UserUpdated', { userId: string; organisationId: string; changes: Partial<UserProfile>; updatedAt: string }>
  | DomainEvent<'UserVariablesSet', { userId: string; organisationId: string; values: Record<string, VariableValue>; setAt: string }>;

export type UserCommand =
  | { type: 'CreateUser'; data: { userId: string; organisationId: string; externalUserId: string; profile: NewUserProfile; now: string } }
  | { type: 'UpdateUser'; data: { userId: string; organisationId: string; changes: UserProfileChanges; now: string } }
  /** The user's variables become exactly these (variable config id → value); types are checked on the configs. */
  | { type: 'SetUserVariables'; data: { userId: string; organisationId: string; values: { variableConfigId: string; value: VariableValue }[]; now: string } };

export type UserState = { exists: false } | ({ exists: true; variables: Record<string, VariableValue> } & User);

export const userDecider: Decider<UserCommand, UserEvent, UserState> = {
  initialState: { exists: false },

  decide(command, state) {
    switch (command.type) {
      case 'CreateUser': {
        const { userId, organisationId, externalUserId, profile, now } = command.data;
        if (state.exists) throw new DomainError('conflict', `User ${userId} already exists`);
        if (externalUserId.trim().length === 0) throw new DomainError('invalid', 'A user needs an externalUserId');
        const { emailVerified, ...rest } = profile;
        const created: UserProfile = {
          ...rest,
          roles: unique(rest.roles),
          communityIds: unique(rest.communityIds),
          emailVerifiedAt: emailVerified ? now : null,
        };
        checkProfile(created);
        return [{ type: 'UserCreated', data: { userId, organisationId, externalUserId, ...created, createdAt: now } }];
      }
      case 'UpdateUser': {
        const { userId, organisationId, changes, now } = command.data;
        const current = requireUser(state, userId, organisationId);
        const { emailVerified, socialHandles, ...plain } = changes;
        const next: UserProfile = { ...profileOf(current), ...definedOnly(plain) };
        if (plain.roles) next.roles = unique(plain.roles);
        if (plain.communityIds) next.communityIds = unique(plain.communityIds);
        if (socialHandles) next.socialHandles = { ...current.socialHandles, ...definedOnly(socialHandles) };
        // A new address is not verified yet, unless the same request says it is.
        if (next.email !== current.email) next.emailVerifiedAt = null;
        if (emailVerified === true) next.emailVerifiedAt = next.email === current.email && current.emailVerifiedAt ? current.emailVerifiedAt : now;
        if (emailVerified === false) next.emailVerifiedAt = null;
        checkProfile(next);
        const changed = changedFields(profileOf(current), next);
        if (Object.keys(changed).length === 0) return [];
        return [{ type: 'UserUpdated', data: { userId, organisationId, changes: changed, updatedAt: now } }];
      }
      case 'SetUserVariables': {
        const { userId, organisationId, values, now } = command.data;
        const current = requireUser(state, userId, organisationId);
        const next: Record<string, VariableValue> = {};
        for (const { variableConfigId, value } of values) {
          if (variableConfigId in next) throw new DomainError('invalid', `The variable ${variableConfigId} is given more than once`);
          next[variableConfigId] = value;
        }
        const sorted = Object.fromEntries(Object.entries(next).sort(([a], [b]) => a.localeCompare(b)));
        if (JSON.stringify(sorted) === JSON.stringify(current.variables)) return [];
        return [{ type: 'UserVariablesSet', data: { userId, organisationId, values: sorted, setAt: now } }];
      }
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'UserCreated': {
        const { userId, createdAt, ...rest } = event.data;
        return { exists: true, ...rest, id: userId, createdAt, updatedAt: createdAt, variables: {} };
      }
      case 'UserUpdated':
        return state.exists ? { ...state, ...event.data.changes, updatedAt: event.data.updatedAt } : state;
      case 'UserVariablesSet':
        return state.exists ? { ...state, variables: event.data.values } : state;
    }
  },
};

/** The user, if it exists and belongs to the organisation; another organisation's user is not found. */
export function requireUser(state: UserState, userId: string, organisationId: string): Extract<UserState, { exists: true }> {
  if (!state.exists || state.organisationId !== organisationId) throw new DomainError('not_found', `User ${userId} not found`);
  return state;
}

export function userOf(state: UserState): User {
  if (!state.exists) throw new DomainError('not_found', 'User not found');
  const { exists: _exists, variables: _variables, ...user } = state;
  return user;
}

function checkProfile(profile: UserProfile): void {
  if (profile.emailVerifiedAt !== null && profile.email === null) throw new DomainError('invalid', 'emailVerified needs an email address');
  const { birthDay, birthMonth, birthYear } = profile;
  if (birthDay !== null && birthMonth !== null) {
    // Without a year, 29 February is possible.
    const days = new Date(Date.UTC(birthYear ?? 2000, birthMonth, 0)).getUTCDate();
    if (birthDay > days) throw new DomainError('invalid', `birthDay ${birthDay} does not exist in month ${birthMonth}`);
  }
}

function profileOf(user: User): UserProfile {
  const { id: _id, organisationId: _organisationId, externalUserId: _externalUserId, createdAt: _createdAt, updatedAt: _updatedAt, ...profile } = user;
  return profile;
}

function changedFields(before: UserProfile, after: UserProfile): Partial<UserProfile> {
  const changed: Record<string, unknown> = {};
  for (const key of Object.keys(after) as (keyof UserProfile)[]) {
    if (JSON.stringify(before[key]) !== JSON.stringify(after[key])) changed[key] = after[key];
  }
  return changed;
}

function definedOnly<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function unique(values: string[]): string[] {
  return [...new Set(values)];
}

export interface XpBreakdown {
  total: number;
  knowledge: number;
  creativity: number;
  loyalty: number;
  influence: number;
  participation: number;
  contribution: number;
}

export interface TeamMember {
  id: string;
  username: string | null;
  displayName: string | null;
  bio: string | null;
  profilePictureUrl: string | null;
  emailVerified: string | null;
  locale: string | null;
  fullName: string | null;
  parentEmail: string | null;
  email: string | null;
  organisationId: string;
  externalUserId: string;
  createdAt: string;
  updatedAt: string;
  points: number;
  keys: number;
  xp: XpBreakdown;
  roles: string[];
  isAnonymous: boolean;
  birthDay: number | null;
  birthMonth: number | null;
  birthYear: number | null;
  socialHandles: SocialHandles;
  communityData: {
    communityId: string;
    streak: { currentStreak: number; lastExtendedAt: string | null; longestStreak: number };
    challengesCompleted: number;
    achievementsCompleted: number;
    points: number;
    xp: XpBreakdown;
    hasAcceptedRules: boolean;
  }[];
}

export function zeroXp(): XpBreakdown {
  return { total: 0, knowledge: 0, creativity: 0, loyalty: 0, influence: 0, participation: 0, contribution: 0 };
}

/** What a user has earned in one community (the engine's ledgers, as the `user_ledgers` read model keeps them). */
export interface CommunityLedger {
  communityId: string;
  points: number;
  xp: XpBreakdown;
  challengesCompleted: number;
  /** Achievements earned in the community (the `achievements` read model). */
  achievementsCompleted: number;
  streak: { currentStreak: number; lastExtendedAt: string | null; longestStreak: number };
}

function sumXp(xps: XpBreakdown[]): XpBreakdown {
  const total = zeroXp();
  for (const xp of xps) for (const key of Object.keys(total) as (keyof XpBreakdown)[]) total[key] += xp[key];
  return total;
}

/**
 * The contract's team member record: the profile, plus points and XP summed over the user's communities
 * and per-community data for each community the user belongs to or has earned in. Keys are not earned by
 * anything yet (0); achievements are counted per community by the `achievements` read model.
 */
export function teamMember(user: User, ledgers: CommunityLedger[] = []): TeamMember {
  const byCommunity = new Map(ledgers.map((ledger) => [ledger.communityId, ledger]));
  const communityIds = [...user.communityIds, ...ledgers.map((ledger) => ledger.communityId).filter((id) => !user.communityIds.includes(id))];
  return {
    id: user.id,
    username: user.username,
    displayName: user.displayName,
    bio: user.bio,
    profilePictureUrl: user.profilePictureUrl,
    emailVerified: user.emailVerifiedAt,
    locale: user.locale,
    fullName: user.fullName,
    parentEmail: user.parentEmail,
    email: user.email,
    organisationId: user.organisationId,
    externalUserId: user.externalUserId,
    createdAt: user.createdAt,
    updatedAt: user.updatedAt,
    points: ledgers.reduce((sum, ledger) => sum + ledger.points, 0),
    keys: 0,
    xp: sumXp(ledgers.map((ledger) => ledger.xp)),
    roles: user.roles,
    isAnonymous: user.isAnonymous,
    birthDay: user.birthDay,
    birthMonth: user.birthMonth,
    birthYear: user.birthYear,
    socialHandles: user.socialHandles,
    communityData: communityIds.map((communityId) => {
      const ledger = byCommunity.get(communityId);
      return {
        communityId,
        streak: ledger?.streak ?? { currentStreak: 0, lastExtendedAt: null, longestStreak: 0 },
        challengesCompleted: ledger?.challengesCompleted ?? 0,
        achievementsCompleted: ledger?.achievementsCompleted ?? 0,
        points: ledger?.points ?? 0,
        xp: ledger?.xp ?? zeroXp(),
        hasAcceptedRules: false,
      };
    }),
  };
}

/**
 * An external user id names one user per organisation; its own stream, appended in the same transaction
 * as the user, makes the claim atomic. Its state answers "which user is this external id?".
 */
export type ExternalUserIdEvent = DomainEvent<'ExternalUserIdClaimed', { organisationId: string; externalUserId: string; userId: string }>;
export type ExternalUserIdCommand = { type: 'ClaimExternalUserId'; data: ExternalUserIdEvent['data'] };

export const externalUserIdDecider: Decider<ExternalUserIdCommand, ExternalUserIdEvent, { userId: string | null }> = {
  initialState: { userId: null },
  decide(command, state) {
    if (state.userId) throw new DomainError('conflict', `A user with the externalUserId ${command.data.externalUserId} already exists`);
    return [{ type: 'ExternalUserIdClaimed', data: command.data }];
  },
  evolve(_state, event) {
    return { userId: event.data.userId };
  },
};
