import { hash } from 'node:crypto';
import { Router } from 'express';
import { fold } from '../domain/decider.ts';
import { externalUserIdDecider, requireUser, teamMember, userDecider, userOf, type NewUserProfile, type UserEvent, type UserState } from '../domain/user.ts';
import { variableConfigDecider, type VariableValue } from '../domain/variable-config.ts';
import { tenantOf } from '../infra/auth.ts';
import {
  createUserBody,
  issueUserTokenBody,
  setUserVariablesBody,
  teamMemberSchema,
  updateUserBody,
  userTokenSchema,
  userVariablesSchema,
} from '../api/contract/users.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { notFound } from '../infra/http/errors.ts';
import { eventMetadata, idempotencyKeyHeader, parse } from '../api/routes.ts';
import { ID_PATTERN, newId } from '../infra/ids.ts';
import { issueUserToken, userTokenKey } from '../infra/user-tokens.ts';
import { aggregateStream, type CommandPart } from './command-handling.ts';
import type { ServiceContext } from '../api/context.ts';
import { withDecidedState } from './decided-state.ts';
import { runCommand } from './run-command.ts';
import { communityChecks } from './reference-checks.ts';

/** The stream that claims an external user id for one organisation. */
export function externalUserIdStream(organisationId: string, externalUserId: string): string {
  return `externaluserid-${organisationId}-${externalUserIdDigest(externalUserId)}`;
}

/** Digests of external user ids lately named (a custom event names its user by one, every time). */
const digests = new Map<string, string>();
const DIGESTS_KEPT = 10_000;

function externalUserIdDigest(externalUserId: string): string {
  let digest = digests.get(externalUserId);
  if (digest === undefined) {
    if (digests.size >= DIGESTS_KEPT) digests.clear();
    digest = hash('sha256', externalUserId, 'hex').slice(0, 32);
    digests.set(externalUserId, digest);
  }
  return digest;
}

/**
 * The parts of "create this user", appended atomically: the claim on the external id (409 when taken),
 * the user's `UserCreated`, and a check per community. Custom events with `autoCreateUser` reuse them.
 * The user's part is always at index 1.
 */
export function createUserParts(input: {
  userId: string;
  organisationId: string;
  externalUserId: string;
  profile: NewUserProfile;
  now: string;
}): CommandPart[] {
  const { userId, organisationId, externalUserId } = input;
  return [
    {
      stream: externalUserIdStream(organisationId, externalUserId),
      decider: externalUserIdDecider,
      command: { type: 'ClaimExternalUserId', data: { organisationId, externalUserId, userId } },
    },
    { stream: `user-${userId}`, newStream: true, decider: userDecider, command: { type: 'CreateUser', data: input } },
    ...communityChecks(organisationId, input.profile.communityIds),
  ];
}

function userIdParam(raw: unknown): string {
  const userId = String(raw).toLowerCase();
  if (!ID_PATTERN.test(userId)) throw notFound('User not found');
  return userId;
}

export function userCommands(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();
  const tokenKey = userTokenKey(ctx.config);

  admin.route(
    router,
    {
      method: 'post',
      path: '/users',
      operationId: 'createUser',
      tag: 'Users',
      summary: 'Create a user (team member)',
      description:
        'Appends `UserCreated` on `user-<id>` and, atomically, claims the externalUserId for the organisation (409 when another user has it). Every communityId must be one of the organisation’s communities (else 400).',
      body: createUserBody,
      example: { externalUserId: 'customer-1', displayName: 'Ada', communityIds: ['6b039d2d3be9a23a28e68a12'] },
      headers: [idempotencyKeyHeader],
      responses: {
        201: { description: 'The created user as a team member record', schema: teamMemberSchema },
        409: { description: 'The organisation already has a user with this externalUserId (`CONFLICT`)' },
      },
    },
    async (req, res) => {
      const { externalUserId, ...profile } = parse(createUserBody, req.body);
      const { organisationId } = tenantOf(res);
      const { occurredAt } = eventMetadata(req, res);
      const userId = newId();
      await runCommand(ctx, req, res, {
        parts: createUserParts({ userId, organisationId, externalUserId, profile: { ...profile, isAnonymous: false }, now: occurredAt! }),
        respond: (events) => ({ status: 201, body: teamMember(userOf(fold(userDecider, events[1] as UserEvent[]))) }),
      });
    },
  );

  admin.route(
    router,
    {
      method: 'patch',
      path: '/users/:userId',
      operationId: 'updateUser',
      tag: 'Users',
      summary: 'Change a user’s profile',
      description:
        'Appends `UserUpdated` with the fields that changed (nothing when nothing changes). Changing the e-mail address unverifies it unless `emailVerified: true` comes with it. 404 for an unknown id or another organisation’s.',
      body: updateUserBody,
      headers: [idempotencyKeyHeader],
      responses: { 200: { description: 'The user after the change, as a team member record', schema: teamMemberSchema } },
    },
    async (req, res) => {
      const userId = userIdParam(req.params.userId);
      const changes = parse(updateUserBody, req.body);
      const { organisationId } = tenantOf(res);
      const { occurredAt } = eventMetadata(req, res);
      const user = withDecidedState(userDecider);
      await runCommand(ctx, req, res, {
        parts: [
          { stream: `user-${userId}`, decider: user.decider, command: { type: 'UpdateUser', data: { userId, organisationId, changes, now: occurredAt! } } },
          ...communityChecks(organisationId, changes.communityIds ?? []),
        ],
        respond: ([events]) => ({ status: 200, body: teamMember(userOf(user.after(events!))) }),
      });
    },
  );

  admin.route(
    router,
    {
      method: 'put',
      path: '/users/:userId/variables',
      operationId: 'setUserVariables',
      tag: 'Users',
      summary: 'Set a user’s variables',
      description:
        'The user’s variables become exactly the given values (`UserVariablesSet`; nothing when nothing changes). Each variableConfigId must be one of the organisation’s variable configs and each value of its type (else 400).',
      body: setUserVariablesBody,
      headers: [idempotencyKeyHeader],
      responses: { 200: { description: 'The user’s variables', schema: userVariablesSchema } },
    },
    async (req, res) => {
      const userId = userIdParam(req.params.userId);
      const values = parse(setUserVariablesBody, req.body).values.map((entry) => ({ ...entry, variableConfigId: entry.variableConfigId.toLowerCase() }));
      const { organisationId } = tenantOf(res);
      const { occurredAt } = eventMetadata(req, res);
      const user = withDecidedState(userDecider);
      await runCommand(ctx, req, res, {
        parts: [
          {
            stream: `user-${userId}`,
            decider: user.decider,
            command: { type: 'SetUserVariables', data: { userId, organisationId, values, now: occurredAt! } },
          },
          ...values.map(({ variableConfigId, value }) => ({
            stream: `variableconfig-${variableConfigId}`,
            decider: variableConfigDecider,
            command: { type: 'CheckVariableValue', data: { variableConfigId, organisationId, value } },
          })),
        ],
        respond: ([events]) => ({ status: 200, body: variablesOf(userId, user.after(events!)) }),
      });
    },
  );

  admin.route(
    router,
    {
      method: 'post',
      path: '/users/:userId/tokens',
      operationId: 'issueUserToken',
      tag: 'Users',
      summary: 'Issue a short-lived user token for the integration API',
      description:
        'Signs a JWT (HS256; `sub` = user id, `org` = organisation id) valid for `expiresInSeconds` (60..86400, default 3600). Send it as `Authorization: Bearer <token>` on `/api/v2/integration/me`. Nothing is stored or appended, so a retry simply issues another token. 404 for an unknown id or another organisation’s.',
      body: issueUserTokenBody,
      responses: { 200: { description: 'The token and when it expires', schema: userTokenSchema } },
    },
    async (req, res) => {
      const userId = userIdParam(req.params.userId);
      const { expiresInSeconds } = parse(issueUserTokenBody, req.body ?? {});
      const { organisationId } = tenantOf(res);
      requireUser(await aggregateStream(ctx.store, `user-${userId}`, userDecider), userId, organisationId);
      res.status(200).json(await issueUserToken(tokenKey, { userId, organisationId, expiresInSeconds }));
    },
  );

  return router;
}

function variablesOf(userId: string, state: UserState): { userId: string; values: { variableConfigId: string; value: VariableValue }[] } {
  if (!state.exists) throw notFound('User not found');
  return { userId, values: Object.entries(state.variables).map(([variableConfigId, value]) => ({ variableConfigId, value })) };
}
