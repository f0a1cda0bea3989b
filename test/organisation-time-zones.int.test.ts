import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchTimeZones, createTimeZoneTable, type TimeZoneRow } from '../projectors/organisation-time-zones.ts';
import { withTableTypes } from '../infra/database.ts';
import { freshDatabase, type TestDatabase } from './support/databases.ts';

function settingsChanged(organisationId: string, timezone: string) {
  return {
    id: organisationId,
    type: 'OrganisationSettingsChanged',
    stream: `organisation-${organisationId}`,
    revision: 1n,
    position: '0',
    data: { organisationId, timezone },
    metadata: {},
    createdAt: new Date(),
  } as unknown as Parameters<BatchTimeZones['record']>[0];
}

describe("a batch's time zones", () => {
  let test: TestDatabase;

  beforeAll(async () => {
    test = await freshDatabase();
    await createTimeZoneTable(test.database.db, 'zones');
    await withTableTypes<{ zones: TimeZoneRow }>(test.database.db)
      .insertInto('zones')
      .values([
        { id: 'tokyo', time_zone: 'Asia/Tokyo' },
        { id: 'paris', time_zone: 'Europe/Paris' },
      ])
      .execute();
  });
  afterAll(() => test.drop());

  it('reads zones when asked, never over a change the batch followed, and writes back only the changes', async () => {
    const zones = await BatchTimeZones.load(test.database.db, 'zones', []);
    expect(zones.of('tokyo')).toBe('UTC');
    zones.record(settingsChanged('paris', 'America/New_York'));
    await zones.ensure(['tokyo', 'paris', 'unknown']);
    expect(zones.of('tokyo')).toBe('Asia/Tokyo');
    // Followed earlier in the batch than the run that asks: later in the log than the row.
    expect(zones.of('paris')).toBe('America/New_York');
    expect(zones.of('unknown')).toBe('UTC');
    // A change followed after a read counts from there on.
    zones.record(settingsChanged('tokyo', 'Pacific/Chatham'));
    await zones.ensure(['tokyo']);
    expect(zones.of('tokyo')).toBe('Pacific/Chatham');
    await zones.save();
    const rows = await test.database.db.selectFrom('zones').selectAll().orderBy('id').execute();
    expect(rows).toEqual([
      { id: 'paris', time_zone: 'America/New_York' },
      { id: 'tokyo', time_zone: 'Pacific/Chatham' },
    ]);
  });
});
