import { sql, type Kysely } from 'kysely';
import { challengeDecider, type ChallengeEvent, type ChallengeRecord, type ChallengeState } from '../domain/challenge.ts';
import type { LegacyProjection as Projection } from './legacy.ts';

/**
 * Challenges as the admin API shows them (the whole record in `document`, folded by the domain's own
 * `evolve`), the columns the lists filter and order on, and which challenge each action belongs to.
 */
export const challengesProjection: Projection = {
  name: 'challenges',
  version: 1,
  tables: ['challenges', 'challenge_actions'],
  filter: { categories: ['challenge'] },
  migrations: {
    '0001_challenges': {
      async up(db) {
        await db.schema
          .createTable('challenges')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('community_id', 'text', (c) => c.notNull())
          .addColumn('is_global_template', 'boolean', (c) => c.notNull())
          .addColumn('available_as_template_for', sql`text[]`, (c) => c.notNull())
          .addColumn('created_at', 'timestamptz', (c) => c.notNull())
          .addColumn('document', 'jsonb', (c) => c.notNull())
          .execute();
        // The admin list and an organisation's own templates: one organisation, newest first.
        await db.schema.createIndex('challenges_by_organisation').on('challenges').columns(['organisation_id', 'created_at desc', 'id desc']).execute();
        // Templates every organisation sees.
        await db.schema
          .createIndex('challenges_global_templates')
          .on('challenges')
          .columns(['created_at desc', 'id desc'])
          .where(sql.ref('is_global_template'), '=', true)
          .execute();
        // Templates shared with named organisations (`available_as_template_for @> array[org]`).
        await db.schema.createIndex('challenges_shared_templates').on('challenges').using('gin').column('available_as_template_for').execute();

        await db.schema
          .createTable('challenge_actions')
          .addColumn('action_id', 'text', (c) => c.primaryKey())
          .addColumn('challenge_id', 'text', (c) => c.notNull())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('challenge_actions_by_challenge').on('challenge_actions').column('challenge_id').execute();
      },
    },
  },

  async apply(db, event) {
    const typed = event as unknown as ChallengeEvent;
    const { challengeId } = typed.data;
    if (typed.type === 'ChallengeCreated') {
      const record = recordOf(challengeDecider.evolve(challengeDecider.initialState, typed));
      await db
        .insertInto('challenges')
        .values({
          id: record.challengeId,
          organisation_id: record.organisationId,
          community_id: record.communityId,
          is_global_template: record.isGlobalTemplate,
          available_as_template_for: record.availableAsTemplateForOrganisations,
          created_at: record.createdAt,
          document: JSON.stringify(record),
        })
        .onConflict((oc) => oc.column('id').doNothing())
        .execute();
      await insertActions(db, record);
      return;
    }
    const row = await db.selectFrom('challenges').select('document').where('id', '=', challengeId).executeTakeFirst();
    if (!row) throw new Error(`${typed.type} for challenge ${challengeId}, which the read model does not hold`);
    const record = recordOf(challengeDecider.evolve({ exists: true, ...(row.document as ChallengeRecord) }, typed));
    await db
      .updateTable('challenges')
      .set({
        is_global_template: record.isGlobalTemplate,
        available_as_template_for: record.availableAsTemplateForOrganisations,
        document: JSON.stringify(record),
      })
      .where('id', '=', challengeId)
      .execute();
    if (typed.type === 'ChallengeUpdated' && typed.data.changes.actions) {
      await db.deleteFrom('challenge_actions').where('challenge_id', '=', challengeId).execute();
      await insertActions(db, record);
    }
  },
};

function recordOf(state: ChallengeState): ChallengeRecord {
  if (!state.exists) throw new Error('a challenge event left no challenge');
  const { exists: _exists, ...record } = state;
  return record;
}

async function insertActions(db: Kysely<any>, record: ChallengeRecord): Promise<void> {
  await db
    .insertInto('challenge_actions')
    .values(record.actions.map((action) => ({ action_id: action.actionId, challenge_id: record.challengeId, organisation_id: record.organisationId })))
    .onConflict((oc) => oc.column('action_id').doNothing())
    .execute();
}
