import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedEvent } from '../infra/event-store/port.ts';
import { webhookDeliveries } from '../process-managers/webhook-deliveries.ts';
import { schemaOf } from '../projectors/runtime/index.ts';
import type { TestDatabase } from './support/databases.ts';
import { preparedDatabase } from './support/projections.ts';

/** An event as the log hands it over; the interest reads its type and its organisation only. */
function recorded(type: string, organisationId: string): RecordedEvent {
  return { id: `${type}-${organisationId}`, type, stream: 's', revision: 0n, position: '0', data: { organisationId }, metadata: {}, createdAt: new Date() };
}

describe('webhook deliveries: the facts they pass over', () => {
  let test: TestDatabase;

  beforeAll(async () => {
    test = await preparedDatabase([webhookDeliveries]);
  });
  afterAll(() => test.drop());

  it("declines only the facts of organisations that never had an endpoint, learning from the log's WebhookCreated", async () => {
    const db = test.database.db.withSchema(schemaOf(webhookDeliveries.name, 1));
    await db
      .insertInto('webhook_endpoints')
      .values([
        { id: 'w1', organisation_id: 'with-endpoint', event_types: JSON.stringify(['*']), status: 'enabled', deleted: false },
        { id: 'w2', organisation_id: 'deleted-endpoint', event_types: JSON.stringify(['*']), status: 'enabled', deleted: true },
      ])
      .execute();
    const interest = webhookDeliveries.interest!();
    await interest.load(db);

    for (const type of [
      'CustomEventLogged',
      'XpEarned',
      'PointsEarned',
      'ChallengeCompleted',
      'RewardAssetClaimed',
      'GiveawayDrawn',
      'LeaderboardWindowClosed',
    ]) {
      expect(interest.wants(recorded(type, 'with-endpoint')), type).toBe(true);
      expect(interest.wants(recorded(type, 'deleted-endpoint')), type).toBe(true);
      expect(interest.wants(recorded(type, 'never')), type).toBe(false);
    }
    // What the process manager records whatever the endpoints: a grant (to tell an asset's reward later), a
    // leaderboard, the webhooks' own events.
    for (const type of ['RewardAssetGranted', 'LeaderboardCreated', 'LeaderboardStatusChanged', 'WebhookDeliveryRequested', 'WebhookReplayRequested']) {
      expect(interest.wants(recorded(type, 'never')), type).toBe(true);
    }

    expect(interest.wants(recorded('CustomEventLogged', 'later'))).toBe(false);
    expect(interest.wants(recorded('WebhookCreated', 'later'))).toBe(true);
    expect(interest.wants(recorded('CustomEventLogged', 'later'))).toBe(true);

    // A load starts again from the tables.
    await interest.load(db);
    expect(interest.wants(recorded('CustomEventLogged', 'later'))).toBe(false);
    expect(interest.wants(recorded('CustomEventLogged', 'with-endpoint'))).toBe(true);
  });
});
