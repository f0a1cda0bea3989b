import { sql } from 'kysely';
import { challengeDecider, type ChallengeEvent, type ChallengeRecord, type ChallengeState } from '../domain/challenge.ts';
import type { Held, Json, Timestamp } from './columns.ts';
import { defineProjection } from './projection.ts';
import { RowBatch } from './row-batch.ts';

export interface ChallengeRow {
  id: string;
  organisation_id: string;
  community_id: string;
  is_global_template: boolean;
  available_as_template_for: string[];
  created_at: Timestamp;
  /** The whole record, as the domain's `evolve` folds it. */
  document: Json<ChallengeRecord>;
}

export interface ChallengeActionRow {
  action_id: string;
  challenge_id: string;
  organisation_id: string;
}

export interface ChallengeTables {
  challenges: ChallengeRow;
  challenge_actions: ChallengeActionRow;
}

/**
 * Challenges as the admin API shows them (the whole record in `document`, folded by the domain's own
 * `evolve`), the columns the lists filter and order on, and which challenge each action belongs to.
 */
export const challengesProjection = defineProjection<ChallengeTables, ChallengeEvent>({
  name: 'challenges',
  version: 1,
  tables: ['challenges', 'challenge_actions'],
  canHandle: ['ChallengeCreated', 'ChallengeUpdated', 'ActionDistributionAssigned'],
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

  /**
   * One read of the challenges the batch names and one (two when it replaces actions) of the actions it
   * touches; its events folded in log order; one upsert per table and one delete of replaced actions.
   */
  async apply(db, events) {
    const challenges = new RowBatch<Held<ChallengeRow>>('challenges', ['id']);
    const actions = new RowBatch<ChallengeActionRow>('challenge_actions', ['action_id']);
    await challenges.load(
      db,
      events.map((event) => ({ id: event.data.challengeId })),
    );
    // The actions the batch names, and every action of a challenge whose actions it replaces.
    const replacing = events.flatMap((event) => (event.type === 'ChallengeUpdated' && event.data.changes.actions ? [event.data.challengeId] : []));
    const replaced =
      replacing.length === 0 ? [] : await db.selectFrom('challenge_actions').select('action_id').where('challenge_id', 'in', replacing).execute();
    const named = events.flatMap((event) =>
      event.type === 'ChallengeCreated' ? event.data.actions : event.type === 'ChallengeUpdated' ? (event.data.changes.actions ?? []) : [],
    );
    await actions.load(db, [...replaced, ...named.map((action) => ({ action_id: action.actionId }))]);

    /** An action already held by any challenge keeps its owner. */
    const addActions = (record: ChallengeRecord) => {
      for (const action of record.actions) {
        if (!actions.get({ action_id: action.actionId })) {
          actions.set({ action_id: action.actionId, challenge_id: record.challengeId, organisation_id: record.organisationId });
        }
      }
    };

    for (const event of events) {
      const { challengeId } = event.data;
      if (event.type === 'ChallengeCreated') {
        const record = recordOf(challengeDecider.evolve(challengeDecider.initialState, event));
        if (!challenges.get({ id: challengeId })) {
          challenges.set({
            id: record.challengeId,
            organisation_id: record.organisationId,
            community_id: record.communityId,
            is_global_template: record.isGlobalTemplate,
            available_as_template_for: record.availableAsTemplateForOrganisations,
            created_at: record.createdAt,
            document: record,
          });
        }
        addActions(record);
        continue;
      }
      const row = challenges.get({ id: challengeId });
      if (!row) throw new Error(`${event.type} for challenge ${challengeId}, which the read model does not hold`);
      const record = recordOf(challengeDecider.evolve({ exists: true, ...row.document }, event));
      challenges.set({
        ...row,
        is_global_template: record.isGlobalTemplate,
        available_as_template_for: record.availableAsTemplateForOrganisations,
        document: record,
      });
      if (event.type === 'ChallengeUpdated' && event.data.changes.actions) {
        const owned = [...actions.values()].filter((action) => action.challenge_id === challengeId);
        for (const action of owned) actions.delete(action);
        addActions(record);
      }
    }

    await challenges.save(db);
    await actions.save(db);
  },
});

function recordOf(state: ChallengeState): ChallengeRecord {
  if (!state.exists) throw new Error('a challenge event left no challenge');
  const { exists: _exists, ...record } = state;
  return record;
}
