import { checkEventName, checkPayload, type CustomEventPayload, type LoggedCustomEvent } from './custom-event.ts';
import { DomainError, type Decider, type DomainEvent } from './decider.ts';

/** A link lives at most a year. */
export const LINK_MAX_EXPIRY_SECONDS = 31_536_000;

interface LinkRef {
  linkId: string;
  organisationId: string;
}

export interface LinkDefinition {
  communityId: string;
  name: string;
  payload: CustomEventPayload;
  isSingleUse: boolean;
}

export interface Redemption {
  userId: string;
  externalUserId: string;
  eventId: string;
  redeemedAt: string;
}

export type CustomEventLinkEvent =
  | DomainEvent<'CustomEventLinkCreated', LinkRef & LinkDefinition & { expiresAt: string; createdBy: string; createdAt: string }>
  | DomainEvent<'CustomEventLinkRedeemed', LinkRef & Redemption>
  /** Recorded by the expiry job at `expiresAt`: read models stop offering the link; redemption was already refused by time. */
  | DomainEvent<'CustomEventLinkExpired', LinkRef & { expiredAt: string }>;

export type CustomEventLinkCommand =
  | { type: 'CreateCustomEventLink'; data: LinkRef & LinkDefinition & { expiryTime: number; actor: string; now: string } }
  | { type: 'RedeemCustomEventLink'; data: LinkRef & Omit<Redemption, 'redeemedAt'> & { now: string } }
  | { type: 'ExpireCustomEventLink'; data: LinkRef & { now: string } };

export type CustomEventLinkState =
  | { exists: false }
  | ({ exists: true; expiresAt: string; createdAt: string; redemptions: Record<string, Redemption>; expired: boolean } & LinkRef & LinkDefinition);

export type ExistingLink = Extract<CustomEventLinkState, { exists: true }>;

/** The link is past its expiry: the route answers 410 `GONE`. */
export class LinkExpired extends DomainError {
  constructor(readonly expiresAt: string) {
    super('conflict', `This link expired at ${expiresAt}`);
    this.name = 'LinkExpired';
  }
}

/** Another organisation's link is as unknown as a missing one. */
export function existingLink(state: CustomEventLinkState, ref: LinkRef): ExistingLink {
  if (!state.exists || state.organisationId !== ref.organisationId) throw new DomainError('not_found', 'Link not found');
  return state;
}

export const customEventLinkDecider: Decider<CustomEventLinkCommand, CustomEventLinkEvent, CustomEventLinkState> = {
  initialState: { exists: false },

  decide(command, state) {
    switch (command.type) {
      case 'CreateCustomEventLink': {
        const { expiryTime, actor, now, ...definition } = command.data;
        if (state.exists) throw new DomainError('conflict', `Link ${definition.linkId} already exists`);
        checkEventName(definition.name);
        checkPayload(definition.payload);
        if (!Number.isSafeInteger(expiryTime) || expiryTime < 1 || expiryTime > LINK_MAX_EXPIRY_SECONDS) {
          throw new DomainError('invalid', `expiryTime: a whole number of seconds from 1 to ${LINK_MAX_EXPIRY_SECONDS}`);
        }
        const expiresAt = new Date(Date.parse(now) + expiryTime * 1000).toISOString();
        return [{ type: 'CustomEventLinkCreated', data: { ...definition, expiresAt, createdBy: actor, createdAt: now } }];
      }

      case 'RedeemCustomEventLink': {
        const { linkId, organisationId, userId, externalUserId, eventId, now } = command.data;
        const link = existingLink(state, command.data);
        // A user's second redemption answers with the first, whatever happened to the link since.
        if (link.redemptions[userId]) return [];
        if (Date.parse(now) >= Date.parse(link.expiresAt)) throw new LinkExpired(link.expiresAt);
        if (link.isSingleUse && Object.keys(link.redemptions).length > 0)
          throw new DomainError('conflict', 'This single-use link was already used by another user');
        return [{ type: 'CustomEventLinkRedeemed', data: { linkId, organisationId, userId, externalUserId, eventId, redeemedAt: now } }];
      }

      case 'ExpireCustomEventLink': {
        const { linkId, organisationId, now } = command.data;
        const link = existingLink(state, command.data);
        if (link.expired) return [];
        if (Date.parse(now) < Date.parse(link.expiresAt)) throw new DomainError('conflict', `The link expires at ${link.expiresAt}, not before`);
        return [{ type: 'CustomEventLinkExpired', data: { linkId, organisationId, expiredAt: link.expiresAt } }];
      }
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'CustomEventLinkCreated': {
        const { createdBy: _createdBy, ...link } = event.data;
        return { exists: true, ...link, redemptions: {}, expired: false };
      }
      case 'CustomEventLinkRedeemed': {
        if (!state.exists) return state;
        const { linkId: _linkId, organisationId: _organisationId, ...redemption } = event.data;
        return { ...state, redemptions: { ...state.redemptions, [redemption.userId]: redemption } };
      }
      case 'CustomEventLinkExpired':
        return state.exists ? { ...state, expired: true } : state;
    }
  },
};

/** What a redemption logged for the user, as the custom event response. */
export function redeemedEvent(link: ExistingLink, userId: string): LoggedCustomEvent {
  const redemption = link.redemptions[userId];
  if (!redemption) throw new DomainError('not_found', 'This user has not redeemed the link');
  return {
    id: redemption.eventId,
    name: link.name,
    userId,
    externalUserId: redemption.externalUserId,
    payload: link.payload,
    createdAt: redemption.redeemedAt,
  };
}
