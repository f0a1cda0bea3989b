import type { ChallengeRecord } from '../../domain/challenge.ts';
import type { CustomEventEvent } from '../../domain/custom-event.ts';
import { NO_STREAK, decideCustomEvent } from '../../domain/engagement.ts';
import type { BatchTimeZones } from '../../projectors/organisation-time-zones.ts';
import type { BatchContext, Recorded } from '../process-manager.ts';
import { OutcomeAppends } from './appends.ts';
import { loadAllocations, loadChallengesAndMembers, loadProgress, pairKey, saveMembers, saveProgress, supplies, uniquePairs, type EngineDb } from './state.ts';

export type LoggedEvent = Recorded<CustomEventEvent>;

/**
 * Engages a run of custom events (no other event of the engine's between them in the log) as one unit of
 * work: the state they need is read in three queries (the communities' challenges with the members, their
 * progress, the allocations; the last two only for events that match a challenge), each event is decided in
 * log order against the state the earlier ones left (the same user twice in a run works): attempts,
 * completions, points, XP, streaks and hand-outs. Everything they cause is appended in one call, and the new
 * state is written in bulk.
 */
export async function engageCustomEvents(db: EngineDb, causes: readonly LoggedEvent[], zones: BatchTimeZones, context: BatchContext): Promise<void> {
  const memberPairs = uniquePairs(causes.map((cause): [string, string] => [cause.data.userId, cause.data.communityId]));
  const { challenges: challengesByCommunity, members } = await loadChallengesAndMembers(
    db,
    [...new Set(causes.map((cause) => cause.data.communityId))],
    memberPairs,
  );
  const plans = causes.map((cause) => {
    const { communityId, organisationId, name } = cause.data;
    const challenges = (challengesByCommunity.get(communityId) ?? []).filter(
      (challenge) => challenge.organisationId === organisationId && challenge.actions.some((action) => action.key === name),
    );
    return { cause, challenges };
  });
  // Only a decision reads a zone: a custom event that matches no challenge (most, in many organisations) needs none.
  await zones.ensure(plans.flatMap(({ cause, challenges }) => (challenges.length > 0 ? [cause.data.organisationId] : [])));
  const progressPairs = uniquePairs(plans.flatMap(({ cause, challenges }) => challenges.map((c): [string, string] => [cause.data.userId, c.challengeId])));
  const progress = await loadProgress(db, progressPairs);
  const rows = await loadAllocations(
    db,
    plans.flatMap(({ challenges }) => challenges.flatMap(allocationIdsOf)),
  );
  const changedProgress = new Set<string>();
  let allocations = supplies(rows);
  const outcome = new OutcomeAppends(rows);

  for (const { cause, challenges } of plans) {
    const event = cause.data;
    const memberKey = pairKey(event.userId, event.communityId);
    const member = members.get(memberKey);
    let streak = member?.streak ?? NO_STREAK;
    if (challenges.length > 0) {
      const decided = decideCustomEvent({
        event,
        timeZone: zones.of(event.organisationId),
        challenges,
        progress: new Map(
          challenges.flatMap((c) => {
            const state = progress.get(pairKey(event.userId, c.challengeId));
            return state ? [[c.challengeId, state] as const] : [];
          }),
        ),
        allocations: new Map([...allocations].filter(([id]) => rows.get(id)?.organisation_id === event.organisationId)),
        streak,
      });
      allocations = new Map([...allocations, ...decided.allocations]);
      streak = decided.streak;
      for (const [challengeId, state] of decided.progress) {
        const key = pairKey(event.userId, challengeId);
        if (progress.get(key) === state) continue;
        progress.set(key, state);
        changedProgress.add(key);
      }
      outcome.add(cause, `engagement-${event.eventId}`, decided.events, decided.distributions, event.eventId);
    }
    const lastActiveAt = member && member.lastActiveAt > event.occurredAt ? member.lastActiveAt : event.occurredAt;
    members.set(memberKey, { streak, lastActiveAt });
  }

  await outcome.appendAndRecord(db, context);
  await saveMembers(
    db,
    memberPairs.map(([userId, communityId]) => ({ userId, communityId, member: members.get(pairKey(userId, communityId))! })),
  );
  await saveProgress(
    db,
    [...changedProgress].map((key) => {
      const [userId, challengeId] = key.split(' ') as [string, string];
      return { userId, challengeId, state: progress.get(key)! };
    }),
  );
}

function allocationIdsOf(challenge: ChallengeRecord): string[] {
  return [
    ...challenge.actions.flatMap((action) => action.distribution?.rewardsConfig.allocations.map((a) => a.id) ?? []),
    ...challenge.rewardDistribution.rewardAllocations.map((a) => a.allocationId),
  ];
}
