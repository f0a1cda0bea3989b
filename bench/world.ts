/**
 * A simulated engagement programme, written as the event log the service would have recorded: organisations
 * with their communities, users, variable configs, rewards (giveaways with draws, asset rewards with and
 * without codes) and their allocations, challenges, leaderboards of every metric and period; then months of
 * custom events with the facts the engagement engine appends for them, leaderboard windows closing (with
 * their rank rewards), giveaways drawn, assets claimed and redeemed.
 *
 * The events are built with the domain's types (the compiler checks their shapes) and the engine's facts
 * with the domain's own decision (`decideCustomEvent`, `distributeEntry`, `ledgerEvents`, `drawWinners`,
 * `rankStandings`), fed with state kept here the way the engine keeps it, so the log is what the service
 * would have written: same streams, same order (each cause before its facts), same metadata. Seeded: the
 * same size gives the same log.
 */
import { externalUserIdStream } from '../command-api/users.ts';
import type { AllocationEvent } from '../domain/allocation.ts';
import { challengeDecider, type Action, type ActionCategory, type ChallengeEvent, type ChallengeRecord, type ChallengeState } from '../domain/challenge.ts';
import type { CommunityEvent } from '../domain/community.ts';
import type { CustomEventEvent, CustomEventLoggedData, CustomEventPayload } from '../domain/custom-event.ts';
import type { DistributionEntry } from '../domain/distribution-entry.ts';
import { drawWinners } from '../domain/draw.ts';
import {
  LEADERBOARD_XP_CATEGORY,
  NO_STREAK,
  decideCustomEvent,
  distributeEntry,
  ledgerEvents,
  type AllocationSupply,
  type ChallengeProgress,
  type StreakState,
  type Who,
} from '../domain/engagement.ts';
import type {
  AllocationDistributedEvent,
  EngagementEvent,
  FrozenStanding,
  LeaderboardWindowEvent,
  PayoutSource,
  RewardAssetEvent,
  RewardAssetGrant,
} from '../domain/engagement-events.ts';
import {
  METRIC_TYPES,
  PERIODS,
  metricFitsPeriod,
  type Condition,
  type LeaderboardEvent,
  type MetricType,
  type Period,
  type RankDistribution,
} from '../domain/leaderboard.ts';
import { fromLocalised, type LocalisedDetails } from '../domain/localised-details.ts';
import type { DomainNameEvent, OrganisationEvent } from '../domain/organisation.ts';
import { NO_REDEEMABLE, type Redeemable, type RewardEvent } from '../domain/reward.ts';
import type { RewardTerms as EngineRewardTerms } from '../process-managers/engagement-engine/state.ts';
import { rankStandings } from '../domain/standings.ts';
import type { ExternalUserIdEvent, UserEvent, UserProfile } from '../domain/user.ts';
import type { VariableConfigEvent } from '../domain/variable-config.ts';
import { isoWeekOf, leaderboardWindowAt, localDate, nextWindow, type Window } from '../domain/windows.ts';
import type { EventMetadata } from '../infra/event-store/port.ts';

/** Every event the simulated service records. */
export type StoreEvent =
  | OrganisationEvent
  | DomainNameEvent
  | CommunityEvent
  | UserEvent
  | ExternalUserIdEvent
  | VariableConfigEvent
  | ChallengeEvent
  | RewardEvent
  | AllocationEvent
  | LeaderboardEvent
  | CustomEventEvent
  | EngagementEvent
  | AllocationDistributedEvent
  | RewardAssetEvent
  | LeaderboardWindowEvent;

/** Where the log goes: events in log order; `drain` between units of work lets the sink write what it holds. */
export interface EventSink {
  append(stream: string, event: StoreEvent, metadata: EventMetadata, at: number): string;
  drain(): Promise<void>;
  readonly count: number;
}

export interface WorldSize {
  organisations: number;
  users: number;
  communitiesPerOrganisation: number;
  challengesPerCommunity: number;
  leaderboardsPerOrganisation: number;
}

/** The default shape for a log of `events` events: 50 organisations and 20,000 users at a million, fewer below. */
export function worldSizeFor(events: number): WorldSize {
  return {
    organisations: clamp(Math.round(events / 20_000), 2, 50),
    users: clamp(Math.round(events / 50), 200, 20_000),
    communitiesPerOrganisation: 3,
    challengesPerCommunity: 4,
    leaderboardsPerOrganisation: 8,
  };
}

export interface WorldSummary {
  events: number;
  customEvents: number;
  organisations: number;
  users: number;
  communities: number;
  challenges: number;
  leaderboards: number;
  windowsClosed: number;
  giveawaysDrawn: number;
  assetsGranted: number;
  byType: Record<string, number>;
  from: string;
  to: string;
}

const DAY = 86_400_000;
const HOUR = 3_600_000;
const MINUTE = 60_000;
/** The store's programme starts on a Monday; set-up takes the first two days, custom events the next ninety. */
const DEFAULT_START = Date.parse('2026-01-05T08:00:00.000Z');
const BULK_DAYS = 90;
/** As the service's default SETTLEMENT_DELAY_SECONDS: a window closes (a draw happens) a minute after its end. */
const SETTLEMENT = MINUTE;
/** The engine appends a batch's facts a moment after its causes were logged. */
const ENGINE_DELAY = 150;

const ZONES = ['UTC', 'Europe/Paris', 'America/New_York', 'Asia/Tokyo', 'Europe/London', 'America/Los_Angeles', 'Australia/Sydney'];
const LANGUAGES = ['en', 'fr', 'nl', 'de'];
/** Custom event names: the first eight are action keys of challenges, `app-open` engages nothing. */
type EventName = 'check-in' | 'page-view' | 'purchase' | 'share' | 'review' | 'referral' | 'video-watched' | 'quiz-answer' | 'app-open';
const EVENT_WEIGHTS: Record<EventName, number> = {
  'check-in': 16,
  'page-view': 22,
  purchase: 9,
  share: 7,
  review: 6,
  referral: 2,
  'video-watched': 10,
  'quiz-answer': 10,
  'app-open': 18,
};
/** Every (metric, period) a leaderboard may have; organisations take them in turn, so all of them occur. */
const LEADERBOARD_KINDS: { metricType: MetricType; period: Period }[] = METRIC_TYPES.flatMap((metricType) =>
  PERIODS.filter((period) => metricFitsPeriod(metricType, period)).map((period) => ({ metricType, period })),
);

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}

const iso = (ms: number) => new Date(ms).toISOString();

/** mulberry32: small, fast and good enough to spread a benchmark's data. */
class Random {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  next(): number {
    let t = (this.state += 0x6d2b79f5);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }
  weighted<T extends string>(weights: Record<T, number>): T {
    const entries = Object.entries(weights) as [T, number][];
    let target = this.next() * entries.reduce((sum, [, weight]) => sum + weight, 0);
    for (const [item, weight] of entries) {
      target -= weight;
      if (target < 0) return item;
    }
    return entries[entries.length - 1]![0];
  }
  /** Eight hex digits. */
  word(): string {
    return ((this.next() * 4294967296) >>> 0).toString(16).padStart(8, '0');
  }
  /** A 24-hex id as `newId` makes them: seconds since the epoch, then random. */
  id(at: number): string {
    return (
      Math.floor(at / 1000)
        .toString(16)
        .padStart(8, '0') +
      this.word() +
      this.word()
    );
  }
  uuid(): string {
    const hex = this.word() + this.word() + this.word() + this.word();
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-${((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16)}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
  }
}

/** A min-heap of timed work (window closes, draws, claims), run in time order between custom events. */
class Timers {
  private heap: { at: number; seq: number; run: () => void }[] = [];
  private seq = 0;
  add(at: number, run: () => void): void {
    const heap = this.heap;
    heap.push({ at, seq: this.seq++, run });
    for (let i = heap.length - 1; i > 0;) {
      const parent = (i - 1) >> 1;
      if (!this.before(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }
  nextAt(): number {
    return this.heap[0]?.at ?? Infinity;
  }
  pop(): { at: number; run: () => void } {
    const heap = this.heap;
    const top = heap[0]!;
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      for (let i = 0; ;) {
        const left = 2 * i + 1;
        const right = left + 1;
        let smallest = i;
        if (left < heap.length && this.before(heap[left]!, heap[smallest]!)) smallest = left;
        if (right < heap.length && this.before(heap[right]!, heap[smallest]!)) smallest = right;
        if (smallest === i) break;
        [heap[i], heap[smallest]] = [heap[smallest]!, heap[i]!];
        i = smallest;
      }
    }
    return top;
  }
  private before(a: { at: number; seq: number }, b: { at: number; seq: number }): boolean {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }
}

interface Organisation {
  id: string;
  index: number;
  timeZone: string;
  adminTokenId: string;
  apiTokenId: string;
  variableConfigId: string;
  communities: string[];
  users: User[];
  leaderboards: Board[];
  rewards: Map<string, RewardTerms>;
}

interface User {
  id: string;
  externalUserId: string;
  organisation: Organisation;
  communities: string[];
  created: boolean;
  variables: Record<string, string>;
  /** Where the user was last active, as the engine picks a pay-out community. */
  lastActive: { communityId: string; at: string } | null;
}

/** A reward as the simulation keeps it: what the engine copies into an asset, and how it is handed out. */
interface RewardTerms extends EngineRewardTerms {
  rewardId: string;
  kind: 'entries' | 'asset';
  communityId: string;
  drawsAt: string | null;
  supply: number;
}

interface AllocationState extends AllocationSupply {
  amountToDistribute: number;
  firstCodeIndex: number | null;
}

interface Tally {
  score: number;
  reachedAt: string;
  marks: Set<string>;
}

interface Board {
  id: string;
  organisation: Organisation;
  name: string;
  metricType: MetricType;
  period: Period;
  startsAt: string;
  expiresAt: string | null;
  status: 'scheduled' | 'live';
  conditions: Condition[];
  communityId: string | null;
  rewards: RankDistribution[];
  /** The last window a fact fell into: facts come in time order, so it is nearly always the next one's too. */
  lastWindow: Window | null;
  tallies: Map<string, Map<string, Tally>>;
}

type GrantedEvent = Extract<RewardAssetEvent, { type: 'RewardAssetGranted' }>;

/** The cause of engine work: what the engine stamps its facts with. */
interface Cause {
  id: string;
  organisationId: string;
  correlationId: string;
}

/**
 * One batch of the engine's appends, in the order the engine appends them: each cause's facts on its own
 * stream with its asset grants after it, then each allocation's hand-outs (all causes, in order).
 */
class EngineBatch {
  private readonly streams: { stream: string; events: (EngagementEvent | GrantedEvent)[]; cause: Cause }[] = [];
  private readonly handOuts = new Map<string, { event: AllocationDistributedEvent; cause: Cause }[]>();
  size = 0;

  facts(stream: string, events: EngagementEvent[], cause: Cause): void {
    if (events.length === 0) return;
    this.streams.push({ stream, events, cause });
    this.size += events.length;
  }

  grant(grant: RewardAssetGrant, cause: Cause): void {
    this.streams.push({ stream: `rewardasset-${grant.assetId}`, events: [{ type: 'RewardAssetGranted', data: grant }], cause });
    this.size += 1;
  }

  handOut(event: AllocationDistributedEvent, cause: Cause): void {
    const list = this.handOuts.get(event.data.allocationId) ?? [];
    list.push({ event, cause });
    this.handOuts.set(event.data.allocationId, list);
    this.size += 1;
  }

  /** Appends everything to the sink and returns what it appended, in log order. */
  flush(sink: EventSink, at: number): { stream: string; event: StoreEvent }[] {
    const written: { stream: string; event: StoreEvent }[] = [];
    const stamp = (cause: Cause, occurredAt: string): EventMetadata => ({
      organisationId: cause.organisationId,
      actor: 'engine',
      causationId: cause.id,
      correlationId: cause.correlationId,
      occurredAt,
    });
    for (const { stream, events, cause } of this.streams) {
      for (const event of events) {
        sink.append(stream, event, stamp(cause, event.data.occurredAt), at);
        written.push({ stream, event });
      }
    }
    for (const [allocationId, list] of this.handOuts) {
      for (const { event, cause } of list) {
        const stream = `allocation-${allocationId}`;
        sink.append(stream, event, stamp(cause, event.data.occurredAt), at);
        written.push({ stream, event });
      }
    }
    this.streams.length = 0;
    this.handOuts.clear();
    this.size = 0;
    return written;
  }
}

/**
 * Writes the whole programme to `sink`, until the log holds about `target` events. `start` is when its
 * set-up begins (a fixed date by default, so a size always gives the same log).
 */
export async function generateWorld(
  target: number,
  sink: EventSink,
  size: WorldSize = worldSizeFor(target),
  options: { seed?: number; start?: number } = {},
): Promise<WorldSummary> {
  const random = new Random(options.seed ?? 20260105);
  const start = options.start ?? DEFAULT_START;
  const bulkStart = start + 2 * DAY;
  const timers = new Timers();
  const organisations: Organisation[] = [];
  const usersById = new Map<string, User>();
  const challengesByCommunity = new Map<string, ChallengeRecord[]>();
  const allocationIdsOfChallenge = new Map<string, string[]>();
  const allocations = new Map<string, AllocationState>();
  const progress = new Map<string, ChallengeProgress>();
  const streaks = new Map<string, StreakState>();
  const entries = new Map<string, Map<string, number>>();
  /** What each allocation is for (`<organisationId>:<purpose>`), so challenges and leaderboards pick theirs. */
  const purposes = new Map<string, string>();
  const organisationsById = new Map<string, Organisation>();
  const byType: Record<string, number> = {};
  const summary = { customEvents: 0, windowsClosed: 0, giveawaysDrawn: 0, assetsGranted: 0, leaderboards: 0, challenges: 0 };
  let engine = new EngineBatch();
  let now = start;

  const append = (stream: string, event: StoreEvent, metadata: EventMetadata, at = now): string => {
    byType[event.type] = (byType[event.type] ?? 0) + 1;
    return sink.append(stream, event, metadata, at);
  };
  const adminMetadata = (organisation: Organisation, at: number): EventMetadata => {
    const requestId = random.uuid();
    return { organisationId: organisation.id, actor: organisation.adminTokenId, causationId: requestId, correlationId: requestId, occurredAt: iso(at) };
  };
  const details = (title: string): LocalisedDetails =>
    LANGUAGES.slice(0, 2).map((language) => ({
      language,
      title: `${title} (${language})`,
      description: `${title}: take part and earn rewards`,
      light: { primaryImageUrl: `https://cdn.engage.bench/${language}/light.png`, secondaryImageUrl: '' },
      dark: { primaryImageUrl: `https://cdn.engage.bench/${language}/dark.png`, secondaryImageUrl: '' },
    }));

  // ------------------------------------------------------------------------------------------------ set-up
  for (let index = 0; index < size.organisations; index++) {
    now = start + index * 10 * MINUTE;
    const slug = `bench-${index}`;
    const domain = `${slug}.engage.bench`;
    const organisation: Organisation = {
      id: random.id(now),
      index,
      timeZone: ZONES[index % ZONES.length]!,
      adminTokenId: random.id(now),
      apiTokenId: random.id(now),
      variableConfigId: random.id(now),
      communities: [],
      users: [],
      leaderboards: [],
      rewards: new Map(),
    };
    organisations.push(organisation);
    organisationsById.set(organisation.id, organisation);
    const cli: EventMetadata = { actor: 'cli', organisationId: organisation.id, occurredAt: iso(now) };
    append(`domain-${domain}`, { type: 'DomainClaimed', data: { hostname: domain, organisationId: organisation.id, kind: 'standard' } }, cli);
    append(
      `organisation-${organisation.id}`,
      {
        type: 'OrganisationCreated',
        data: { organisationId: organisation.id, name: `Bench ${index}`, slug, domain, defaultLanguage: 'en', timezone: 'UTC', createdAt: iso(now) },
      },
      cli,
    );
    append(
      `organisation-${organisation.id}`,
      {
        type: 'ApiTokenIssued',
        data: {
          organisationId: organisation.id,
          tokenId: organisation.adminTokenId,
          name: 'admin',
          prefix: random.word(),
          secretHash: random.word() + random.word() + random.word() + random.word(),
          domain,
          families: ['admin', 'integration', 'analytics'],
          issuedAt: iso(now),
        },
      },
      cli,
    );
    now += MINUTE;
    append(
      `organisation-${organisation.id}`,
      {
        type: 'ApiTokenIssued',
        data: {
          organisationId: organisation.id,
          tokenId: organisation.apiTokenId,
          name: 'backend',
          prefix: random.word(),
          secretHash: random.word() + random.word() + random.word() + random.word(),
          domain,
          families: ['admin', 'integration'],
          issuedAt: iso(now),
        },
      },
      { ...cli, occurredAt: iso(now) },
    );
    if (organisation.timeZone !== 'UTC') {
      append(
        `organisation-${organisation.id}`,
        {
          type: 'OrganisationSettingsChanged',
          data: { organisationId: organisation.id, name: `Bench ${index}`, defaultLanguage: 'en', timezone: organisation.timeZone, changedAt: iso(now) },
        },
        adminMetadata(organisation, now),
      );
    }
    now += MINUTE;
    append(
      `variableconfig-${organisation.variableConfigId}`,
      {
        type: 'VariableConfigCreated',
        data: {
          variableConfigId: organisation.variableConfigId,
          organisationId: organisation.id,
          key: 'tier',
          type: 'string',
          description: 'Loyalty tier',
          createdAt: iso(now),
          createdBy: organisation.adminTokenId,
        },
      },
      adminMetadata(organisation, now),
    );
    for (let c = 0; c < size.communitiesPerOrganisation; c++) {
      now += MINUTE;
      const communityId = random.id(now);
      organisation.communities.push(communityId);
      challengesByCommunity.set(communityId, []);
      append(
        `community-${communityId}`,
        {
          type: 'CommunityCreated',
          data: {
            communityId,
            organisationId: organisation.id,
            name: `Community ${index}.${c}`,
            description: c === 0 ? 'Everyone' : null,
            details: fromLocalised(details(`Community ${c}`)),
            createdAt: iso(now),
            createdBy: organisation.adminTokenId,
          },
        },
        adminMetadata(organisation, now),
      );
    }
    createRewards(organisation);
    for (let c = 0; c < organisation.communities.length; c++) {
      for (let k = 0; k < size.challengesPerCommunity; k++) createChallenge(organisation, c, k);
    }
    for (let k = 0; k < size.leaderboardsPerOrganisation; k++) createLeaderboard(organisation, k);
    await sink.drain();
  }

  // Users: half imported during set-up, the others created by their first custom event (`autoCreateUser`).
  const usersPerOrganisation = Math.max(1, Math.floor(size.users / size.organisations));
  for (const organisation of organisations) {
    for (let u = 0; u < usersPerOrganisation; u++) {
      const at = start + 6 * HOUR + Math.floor(random.next() * (bulkStart - start - 7 * HOUR));
      const home = random.pick(organisation.communities);
      const user: User = {
        id: random.id(at),
        externalUserId: `ext-${organisation.index}-${u}`,
        organisation,
        communities: random.chance(0.3) ? [...new Set([home, random.pick(organisation.communities)])] : [home],
        created: false,
        variables: {},
        lastActive: null,
      };
      organisation.users.push(user);
      usersById.set(user.id, user);
    }
  }
  const imported = organisations.flatMap((organisation) => organisation.users.filter((_, u) => u % 2 === 0));
  imported.sort((a, b) => (a.id < b.id ? -1 : 1));
  for (const [index, user] of imported.entries()) {
    now = parseInt(user.id.slice(0, 8), 16) * 1000;
    createUser(user, null, adminMetadata(user.organisation, now));
    if (random.chance(0.3)) setVariables(user);
    if (index % 500 === 0) await sink.drain();
  }
  await sink.drain();

  // -------------------------------------------------------------------------------------------- custom events
  const organisationWeights = organisations.map((organisation) => 1 / (1 + (organisation.index % 7)));
  const totalWeight = organisationWeights.reduce((sum, weight) => sum + weight, 0);
  const setupEvents = sink.count;
  let expected = Math.max(1, Math.round((target - setupEvents) / 5));
  let batchLeft = random.int(1, 40);
  const bulkEnd = bulkStart + BULK_DAYS * DAY;
  now = bulkStart;
  while (sink.count < target) {
    // Spread what is left of the log over what is left of the period, re-estimating the events per cause.
    if (summary.customEvents > 0 && summary.customEvents % 1000 === 0) {
      const perCause = (sink.count - setupEvents) / summary.customEvents;
      expected = summary.customEvents + Math.max(1, Math.round((target - sink.count) / perCause));
    }
    const remaining = Math.max(1, expected - summary.customEvents);
    now += -Math.log(1 - random.next()) * Math.max(1, (bulkEnd - now) / remaining);
    while (timers.nextAt() <= now) {
      const timer = timers.pop();
      flushEngine(timer.at);
      const before = now;
      now = timer.at;
      timer.run();
      now = Math.max(before, now);
    }
    logCustomEvent();
    if (--batchLeft <= 0) {
      flushEngine(now + ENGINE_DELAY);
      batchLeft = random.int(1, 40);
      await sink.drain();
    }
  }
  flushEngine(now + ENGINE_DELAY);
  await sink.drain();

  return {
    events: sink.count,
    customEvents: summary.customEvents,
    organisations: organisations.length,
    users: [...usersById.values()].filter((user) => user.created).length,
    communities: organisations.length * size.communitiesPerOrganisation,
    challenges: summary.challenges,
    leaderboards: summary.leaderboards,
    windowsClosed: summary.windowsClosed,
    giveawaysDrawn: summary.giveawaysDrawn,
    assetsGranted: summary.assetsGranted,
    byType,
    from: iso(start),
    to: iso(now),
  };

  // ---------------------------------------------------------------------------------------------- the parts

  function createRewards(organisation: Organisation): void {
    const common = (title: string, communityId: string) => ({
      communityId,
      details: details(title),
      tags: ['bench', title.toLowerCase().split(' ')[0]!],
      campaigns: ['winter'],
      additionalCommunityIds: organisation.communities.filter((id) => id !== communityId).slice(0, 1),
      metadata: { sponsor: `Sponsor ${organisation.index}` },
    });
    const giveaway = (title: string, drawsAt: number, supply: number) => {
      now += MINUTE;
      const rewardId = random.id(now);
      const data = { ...common(title, organisation.communities[0]!), kind: 'entries' as const, drawsAt: iso(drawsAt), supply };
      append(
        `reward-${rewardId}`,
        { type: 'RewardCreated', data: { ...data, rewardId, organisationId: organisation.id, createdAt: iso(now), createdBy: organisation.adminTokenId } },
        adminMetadata(organisation, now),
      );
      organisation.rewards.set(rewardId, termsOf(rewardId, { ...data, redeemable: NO_REDEEMABLE, codes: null, expiresAt: null }));
      timers.add(drawsAt + SETTLEMENT + random.int(0, 20_000), () => drawGiveaway(organisation, rewardId));
      return rewardId;
    };
    const asset = (title: string, codes: string[] | null, content: string | null) => {
      now += MINUTE;
      const rewardId = random.id(now);
      const redeemable: Redeemable = {
        ...NO_REDEEMABLE,
        content,
        instructions: 'Show this at the counter',
        supportEmail: `support@bench-${organisation.index}.example`,
        redeemByDate: iso(start + 365 * DAY),
      };
      const data = { ...common(title, organisation.communities[0]!), kind: 'asset' as const, redeemable, codes, expiresAt: null };
      append(
        `reward-${rewardId}`,
        { type: 'RewardCreated', data: { ...data, rewardId, organisationId: organisation.id, createdAt: iso(now), createdBy: organisation.adminTokenId } },
        adminMetadata(organisation, now),
      );
      organisation.rewards.set(rewardId, termsOf(rewardId, { ...data, drawsAt: null, supply: 0 }));
      return rewardId;
    };
    const spring = giveaway('Spring giveaway', bulkStart + 33 * DAY + 10 * HOUR, 3);
    const summer = giveaway('Summer giveaway', bulkStart + 68 * DAY + 10 * HOUR, 5);
    const grand = giveaway('Grand prize', bulkStart + 200 * DAY, 1);
    const vouchers = asset(
      'Coffee voucher',
      Array.from({ length: 500 }, (_, i) => `COFFEE-${organisation.index}-${i.toString().padStart(4, '0')}`),
      null,
    );
    const badges = asset('Digital badge', null, 'Thank you for taking part');
    addAllocation(organisation, spring, 'action-entries', 1_000_000, 1);
    addAllocation(organisation, spring, 'challenge-entries', 1_000_000, 5);
    addAllocation(organisation, summer, 'action-entries', 1_000_000, 2);
    addAllocation(organisation, grand, 'challenge-entries', 1_000_000, 1);
    addAllocation(organisation, vouchers, 'challenge-assets', 300, 1);
    addAllocation(organisation, vouchers, 'leaderboard-assets', 200, 1);
    addAllocation(organisation, badges, 'challenge-assets', 5_000, 1);
    addAllocation(organisation, badges, 'leaderboard-assets', 1_000, 1);
  }

  function termsOf(
    rewardId: string,
    data: {
      kind: 'entries' | 'asset';
      communityId: string;
      details: LocalisedDetails;
      tags: string[];
      campaigns: string[];
      additionalCommunityIds: string[];
      metadata: Record<string, unknown>;
      drawsAt: string | null;
      supply: number;
      redeemable: Redeemable;
      codes: string[] | null;
      expiresAt: string | null;
    },
  ): RewardTerms {
    return { rewardId, ...data, details: fromLocalised(data.details) };
  }

  /** The organisation's allocations by purpose, in the order they were added. */
  function allocationsFor(organisation: Organisation, purpose: string): AllocationState[] {
    return [...allocations.values()].filter((allocation) => purposes.get(allocation.allocationId) === `${organisation.id}:${purpose}`);
  }

  function addAllocation(organisation: Organisation, rewardId: string, purpose: string, supply: number, amountToDistribute: number): void {
    now += MINUTE;
    const reward = organisation.rewards.get(rewardId)!;
    const allocationId = random.id(now);
    const allocated = [...allocations.values()].filter((allocation) => allocation.rewardId === rewardId).reduce((sum, a) => sum + a.supply, 0);
    const firstCodeIndex = reward.codes === null ? null : allocated;
    const metadata = adminMetadata(organisation, now);
    append(
      `reward-${rewardId}`,
      {
        type: 'RewardAllocationAdded',
        data: { rewardId, organisationId: organisation.id, allocationId, supply, amountToDistribute, firstCodeIndex, addedAt: iso(now) },
      },
      metadata,
    );
    append(
      `allocation-${allocationId}`,
      {
        type: 'AllocationCreated',
        data: {
          allocationId,
          rewardId,
          organisationId: organisation.id,
          supply,
          amountToDistribute,
          createdAt: iso(now),
          createdBy: organisation.adminTokenId,
        },
      },
      metadata,
    );
    allocations.set(allocationId, {
      allocationId,
      rewardId,
      rewardKind: reward.kind,
      supply,
      distributed: 0,
      drawsAt: reward.drawsAt,
      amountToDistribute,
      firstCodeIndex,
    });
    purposes.set(allocationId, `${organisation.id}:${purpose}`);
  }

  function entryFor(organisation: Organisation, purpose: string, points: number, bonusXp: number, pick: number): DistributionEntry {
    const candidates = allocationsFor(organisation, purpose);
    const allocation = candidates[pick % candidates.length]!;
    return {
      pointsToDistribute: points,
      bonusXpToDistribute: bonusXp,
      rewardsConfig: {
        amountToDistribute: 1,
        allocations: [
          { id: allocation.allocationId, rewardId: allocation.rewardId, supply: allocation.supply, amountToDistribute: allocation.amountToDistribute },
        ],
      },
    };
  }

  function createChallenge(organisation: Organisation, communityIndex: number, k: number): void {
    now += MINUTE;
    const communityId = organisation.communities[communityIndex]!;
    const challengeId = random.id(now);
    const action = (key: EventName, category: ActionCategory, xp: number, extra: Partial<Action> = {}): Action => ({
      actionId: random.id(now),
      key,
      category,
      criteria: [],
      xp,
      isSkippable: false,
      details: details(`Do ${key}`),
      distribution: null,
      ...extra,
    });
    const assets = allocationsFor(organisation, 'challenge-assets');
    const entries = allocationsFor(organisation, 'challenge-entries');
    const shapes = [
      {
        title: 'Daily check-in',
        actions: [action('check-in', 'loyalty', 5)],
        isLinear: false,
        period: 'daily' as const,
        max: 1,
        reward: { points: 10, xp: 5, allocations: [] as AllocationState[], count: 0 },
      },
      {
        title: 'Shopper',
        actions: [
          action('page-view', 'participation', 2),
          action('purchase', 'loyalty', 20, {
            criteria: [{ field: 'amount', operator: 'gte', value: 10 }],
            distribution: entryFor(organisation, 'action-entries', 20, 10, communityIndex),
          }),
        ],
        isLinear: true,
        period: 'weekly' as const,
        max: 2,
        reward: { points: 50, xp: 25, allocations: assets, count: 1 },
      },
      {
        title: 'Social',
        actions: [
          action('share', 'influence', 10),
          action('review', 'contribution', 15, { criteria: [{ field: 'rating', operator: 'gte', value: 4 }] }),
          action('referral', 'influence', 30, { isSkippable: true }),
        ],
        isLinear: false,
        period: 'monthly' as const,
        max: 1,
        reward: { points: 100, xp: 50, allocations: entries, count: 1 },
      },
      {
        title: 'Learner',
        actions: [
          action('video-watched', 'knowledge', 5),
          action('quiz-answer', 'knowledge', 10, { criteria: [{ field: 'correct', operator: 'eq', value: true }] }),
        ],
        isLinear: false,
        period: 'open' as const,
        max: 3,
        reward: { points: 30, xp: 30, allocations: assets.slice(1), count: 1 },
      },
    ];
    const shape = shapes[k % shapes.length]!;
    // One challenge in each third community ends half-way, so expiry shows in the log too.
    const expiresAt = communityIndex === 2 && k === 3 ? bulkStart + 45 * DAY : start + 365 * DAY;
    const event: ChallengeEvent = {
      type: 'ChallengeCreated',
      data: {
        challengeId,
        organisationId: organisation.id,
        communityId,
        details: details(shape.title),
        actions: shape.actions,
        isLinear: shape.isLinear,
        maxCompletionsPerPeriod: shape.max,
        period: shape.period,
        startsAt: iso(bulkStart - DAY),
        expiresAt: iso(expiresAt),
        tags: ['bench'],
        campaigns: k % 2 === 0 ? ['winter'] : [],
        rewardDistribution: {
          points: shape.reward.points,
          xp: shape.reward.xp,
          distributionEventId: random.id(now),
          rewardAllocations: shape.reward.allocations.map((allocation) => ({
            rewardId: allocation.rewardId,
            allocationId: allocation.allocationId,
            amountToDistribute: allocation.amountToDistribute,
          })),
          numberOfRewardsToReceive: Math.min(shape.reward.count, shape.reward.allocations.length),
        },
        isGlobalTemplate: false,
        availableAsTemplateForOrganisations: [],
        featured: k === 0,
        unlockPrice: 0,
        videoConfig: { videoUrl: '', isVideoEnabled: false },
        createdBy: organisation.adminTokenId,
        createdAt: iso(now),
      },
    };
    summary.challenges++;
    foldChallenge(organisation, event);
    // Later changes an admin makes: a distribution on the first action, new tags.
    if (k % 4 === 0) {
      timers.add(bulkStart + (10 + communityIndex) * DAY + random.int(0, DAY), () =>
        foldChallenge(organisation, {
          type: 'ActionDistributionAssigned',
          data: {
            challengeId,
            organisationId: organisation.id,
            actionId: shape.actions[0]!.actionId,
            distribution: entryFor(organisation, 'action-entries', 5, 0, communityIndex + 1),
            assignedBy: organisation.adminTokenId,
            assignedAt: iso(now),
          },
        }),
      );
    }
    if (k % 4 === 1) {
      timers.add(bulkStart + 20 * DAY + random.int(0, DAY), () =>
        foldChallenge(organisation, {
          type: 'ChallengeUpdated',
          data: {
            challengeId,
            organisationId: organisation.id,
            changes: { tags: ['bench', 'spring'], featured: true },
            updatedBy: organisation.adminTokenId,
            updatedAt: iso(now),
          },
        }),
      );
    }
  }

  /** Appends a challenge event and keeps the engine's copy of the challenge (its record folds every event). */
  function foldChallenge(organisation: Organisation, event: ChallengeEvent): void {
    const { challengeId } = event.data;
    append(`challenge-${challengeId}`, event, adminMetadata(organisation, now));
    const communityId = event.type === 'ChallengeCreated' ? event.data.communityId : findCommunityOf(challengeId);
    const list = challengesByCommunity.get(communityId)!;
    const index = list.findIndex((challenge) => challenge.challengeId === challengeId);
    const current: ChallengeState = index < 0 ? challengeDecider.initialState : { exists: true, ...list[index]! };
    const next = challengeDecider.evolve(current, event);
    if (!next.exists) return;
    const { exists: _exists, ...record } = next;
    if (index < 0) list.push(record);
    else list[index] = record;
    // The engine reads a community's challenges ordered by id.
    list.sort((a, b) => (a.challengeId < b.challengeId ? -1 : 1));
    allocationIdsOfChallenge.set(challengeId, [
      ...record.actions.flatMap((action) => action.distribution?.rewardsConfig.allocations.map((a) => a.id) ?? []),
      ...record.rewardDistribution.rewardAllocations.map((a) => a.allocationId),
    ]);
  }

  function findCommunityOf(challengeId: string): string {
    for (const [communityId, list] of challengesByCommunity) if (list.some((challenge) => challenge.challengeId === challengeId)) return communityId;
    throw new Error(`unknown challenge ${challengeId}`);
  }

  function createLeaderboard(organisation: Organisation, k: number): void {
    now += MINUTE;
    const kind = LEADERBOARD_KINDS[(organisation.index * size.leaderboardsPerOrganisation + k) % LEADERBOARD_KINDS.length]!;
    const leaderboardId = random.id(now);
    const conditions: Condition[] =
      k % 3 === 1
        ? [{ type: 'community', communityId: organisation.communities[0]! }]
        : k % 5 === 4
          ? [{ type: 'variable-config', variableConfigId: organisation.variableConfigId, value: 'gold' }]
          : [];
    const scheduled = k === size.leaderboardsPerOrganisation - 1;
    const startsAt = scheduled ? bulkStart + 14 * DAY : bulkStart;
    const board: Board = {
      id: leaderboardId,
      organisation,
      name: `${kind.metricType} ${kind.period}`,
      metricType: kind.metricType,
      period: kind.period,
      startsAt: iso(startsAt),
      expiresAt: kind.period === 'open' && k % 2 === 0 ? iso(bulkStart + 60 * DAY) : null,
      status: scheduled ? 'scheduled' : 'live',
      conditions,
      communityId: conditions.find((condition) => condition.type === 'community')?.communityId ?? null,
      rewards: [],
      lastWindow: null,
      tallies: new Map(),
    };
    organisation.leaderboards.push(board);
    summary.leaderboards++;
    const stream = `leaderboard-${leaderboardId}`;
    append(
      stream,
      {
        type: 'LeaderboardCreated',
        data: {
          leaderboardId,
          organisationId: organisation.id,
          name: board.name,
          description: null,
          metricType: board.metricType,
          period: board.period,
          startsAt: board.startsAt,
          expiresAt: board.expiresAt,
          status: board.status,
          conditions,
          createdBy: organisation.adminTokenId,
          createdAt: iso(now),
        },
      },
      adminMetadata(organisation, now),
    );
    if (board.period === 'weekly' || board.period === 'monthly' || (board.period === 'open' && board.expiresAt !== null)) {
      now += MINUTE;
      const assets = allocationsFor(organisation, 'leaderboard-assets');
      const tier = (startRank: number, endRank: number, points: number, bonusXp: number, allocation: AllocationState): RankDistribution => ({
        startRank,
        endRank,
        distributionEventId: random.id(now),
        pointsToDistribute: points,
        bonusXpToDistribute: bonusXp,
        rewardsConfig: {
          amountToDistribute: 1,
          allocations: [
            { id: allocation.allocationId, rewardId: allocation.rewardId, supply: allocation.supply, amountToDistribute: allocation.amountToDistribute },
          ],
        },
      });
      board.rewards = [tier(1, 1, 500, 100, assets[0]!), tier(2, 5, 200, 50, assets[1]!)];
      append(
        stream,
        {
          type: 'LeaderboardRewardsAssigned',
          data: { leaderboardId, organisationId: organisation.id, rewards: board.rewards, assignedBy: organisation.adminTokenId, assignedAt: iso(now) },
        },
        adminMetadata(organisation, now),
      );
    }
    if (scheduled) {
      timers.add(startsAt, () => {
        board.status = 'live';
        const jobId = `leaderboard-status:${leaderboardId}:live:${board.startsAt}`;
        append(
          stream,
          {
            type: 'LeaderboardStatusChanged',
            data: { leaderboardId, organisationId: organisation.id, from: 'scheduled', to: 'live', changedBy: 'system', changedAt: board.startsAt },
          },
          { organisationId: organisation.id, actor: `job:${jobId}`, causationId: jobId, correlationId: jobId, occurredAt: iso(now) },
        );
      });
    }
    if (board.expiresAt !== null) {
      const expiresAt = board.expiresAt;
      timers.add(Date.parse(expiresAt), () => {
        const jobId = `leaderboard-status:${leaderboardId}:expired:${expiresAt}`;
        append(
          stream,
          {
            type: 'LeaderboardStatusChanged',
            data: { leaderboardId, organisationId: organisation.id, from: board.status, to: 'expired', changedBy: 'system', changedAt: expiresAt },
          },
          { organisationId: organisation.id, actor: `job:${jobId}`, causationId: jobId, correlationId: jobId, occurredAt: iso(now) },
        );
      });
    }
    const first = leaderboardWindowAt(board, organisation.timeZone, board.startsAt);
    if (first?.end) timers.add(Date.parse(first.end) + SETTLEMENT + random.int(0, 30_000), () => closeWindow(board, first));
  }

  /** Imported (`communityId` null: with their communities) or created by a custom event in its community. */
  function createUser(user: User, communityId: string | null, metadata: EventMetadata): void {
    user.created = true;
    const organisation = user.organisation;
    const profile: UserProfile = {
      username: `user${user.externalUserId}`,
      displayName: `User ${user.externalUserId}`,
      email: communityId === null ? `${user.externalUserId}@example.com` : null,
      emailVerifiedAt: null,
      fullName: null,
      parentEmail: null,
      locale: random.pick(LANGUAGES),
      bio: null,
      profilePictureUrl: null,
      roles: [],
      isAnonymous: false,
      birthDay: null,
      birthMonth: null,
      birthYear: null,
      socialHandles: { instagram: null, loyaltyCardNumber: null, tiktok: null },
      communityIds: communityId === null ? user.communities : [communityId],
    };
    if (communityId !== null) user.communities = [communityId];
    append(
      externalUserIdStream(organisation.id, user.externalUserId),
      { type: 'ExternalUserIdClaimed', data: { organisationId: organisation.id, externalUserId: user.externalUserId, userId: user.id } },
      metadata,
    );
    append(
      `user-${user.id}`,
      { type: 'UserCreated', data: { ...profile, userId: user.id, organisationId: organisation.id, externalUserId: user.externalUserId, createdAt: iso(now) } },
      metadata,
    );
  }

  function setVariables(user: User): void {
    const organisation = user.organisation;
    user.variables = { [organisation.variableConfigId]: random.chance(0.4) ? 'gold' : 'silver' };
    append(
      `user-${user.id}`,
      { type: 'UserVariablesSet', data: { userId: user.id, organisationId: organisation.id, values: user.variables, setAt: iso(now) } },
      adminMetadata(organisation, now),
    );
  }

  function customEventMetadata(organisation: Organisation): EventMetadata {
    const requestId = random.uuid();
    return { organisationId: organisation.id, actor: organisation.apiTokenId, causationId: requestId, correlationId: requestId, occurredAt: iso(now) };
  }

  function payloadFor(name: EventName): CustomEventPayload {
    switch (name) {
      case 'purchase':
        return { amount: random.int(1, 200), currency: 'EUR', sku: `SKU-${random.int(1, 500)}`, channel: random.pick(['web', 'app', 'store']) };
      case 'review':
        return { rating: random.int(1, 5), productId: `P${random.int(1, 300)}` };
      case 'quiz-answer':
        return { correct: random.chance(0.7), questionId: `Q${random.int(1, 60)}` };
      case 'page-view':
        return { path: `/products/${random.int(1, 500)}`, referrer: random.chance(0.5) ? 'search' : null };
      case 'video-watched':
        return { videoId: `V${random.int(1, 40)}`, seconds: random.int(5, 600) };
      case 'share':
        return { network: random.pick(['instagram', 'tiktok', 'whatsapp']) };
      case 'referral':
        return { invitee: `friend-${random.int(1, 100000)}` };
      default:
        return {};
    }
  }

  function logCustomEvent(): void {
    let pick = random.next() * totalWeight;
    let organisation = organisations[0]!;
    for (const [index, weight] of organisationWeights.entries()) {
      pick -= weight;
      if (pick < 0) {
        organisation = organisations[index]!;
        break;
      }
    }
    // A few users do most: the user index falls off as a power of a uniform draw.
    const user = organisation.users[Math.floor(organisation.users.length * random.next() ** 1.8)]!;
    const communityId = user.created ? random.pick(user.communities) : random.pick(organisation.communities);
    const name = random.weighted(EVENT_WEIGHTS);
    const metadata = customEventMetadata(organisation);
    if (!user.created) createUser(user, communityId, metadata);
    const eventId = random.id(now);
    const data: CustomEventLoggedData = {
      eventId,
      organisationId: organisation.id,
      communityId,
      userId: user.id,
      externalUserId: user.externalUserId,
      name,
      payload: payloadFor(name),
      nonce: random.chance(0.1) ? random.uuid() : null,
      source: { type: 'api', tokenId: organisation.apiTokenId },
      occurredAt: iso(now),
    };
    const id = append(`customevent-${eventId}`, { type: 'CustomEventLogged', data }, metadata);
    summary.customEvents++;
    const cause: Cause = { id, organisationId: organisation.id, correlationId: metadata.correlationId as string };

    // The engine, as it engages the event: the community's challenges with this action key, by id.
    const challenges = challengesByCommunity
      .get(communityId)!
      .filter((challenge) => challenge.organisationId === organisation.id && challenge.actions.some((action) => action.key === name));
    const streakKey = `${user.id} ${communityId}`;
    if (challenges.length > 0) {
      const supplies = new Map<string, AllocationSupply>();
      const userProgress = new Map<string, ChallengeProgress>();
      for (const challenge of challenges) {
        for (const allocationId of allocationIdsOfChallenge.get(challenge.challengeId) ?? []) supplies.set(allocationId, allocations.get(allocationId)!);
        const state = progress.get(`${user.id} ${challenge.challengeId}`);
        if (state) userProgress.set(challenge.challengeId, state);
      }
      const decided = decideCustomEvent({
        event: data,
        timeZone: organisation.timeZone,
        challenges,
        progress: userProgress,
        allocations: supplies,
        streak: streaks.get(streakKey) ?? NO_STREAK,
      });
      for (const [challengeId, state] of decided.progress) progress.set(`${user.id} ${challengeId}`, state);
      for (const [allocationId, supply] of decided.allocations) allocations.set(allocationId, { ...allocations.get(allocationId)!, ...supply });
      streaks.set(streakKey, decided.streak);
      engine.facts(`engagement-${eventId}`, decided.events, cause);
      for (const distribution of decided.distributions) handOut(organisation, distribution, cause, eventId);
    }
    if (!user.lastActive || user.lastActive.at <= data.occurredAt) user.lastActive = { communityId, at: data.occurredAt };
  }

  /** A hand-out: the allocation's event, the user's entries, and one asset per unit of an asset allocation. */
  function handOut(organisation: Organisation, distribution: AllocationDistributedEvent, cause: Cause, eventSourceId: string): void {
    engine.handOut(distribution, cause);
    const { allocationId, rewardId, userId, amount, firstUnit } = distribution.data;
    const allocation = allocations.get(allocationId)!;
    if (allocation.rewardKind === 'entries') {
      const byUser = entries.get(rewardId) ?? new Map<string, number>();
      byUser.set(userId, (byUser.get(userId) ?? 0) + amount);
      entries.set(rewardId, byUser);
      return;
    }
    const reward = organisation.rewards.get(rewardId)!;
    for (let unit = firstUnit; unit < firstUnit + amount; unit++) {
      const { organisationId, communityId, occurredAt } = distribution.data;
      grant(
        {
          organisationId,
          communityId,
          userId,
          occurredAt,
          assetId: random.id(Date.parse(occurredAt)),
          rewardId,
          allocationId,
          eventSourceId,
          ...assetTerms(reward),
          code: allocation.firstCodeIndex === null || reward.codes === null ? null : (reward.codes[allocation.firstCodeIndex + unit] ?? null),
        },
        cause,
      );
    }
  }

  function assetTerms(reward: RewardTerms) {
    return {
      details: reward.details,
      tags: reward.tags,
      campaigns: reward.campaigns,
      additionalCommunityIds: reward.additionalCommunityIds,
      metadata: reward.metadata,
      redeemable: reward.redeemable,
      expiresAt: reward.expiresAt,
    };
  }

  /** A granted asset; some users claim it later, and some of those redeem it. */
  function grant(asset: RewardAssetGrant, cause: Cause): void {
    engine.grant(asset, cause);
    summary.assetsGranted++;
    if (!random.chance(0.4)) return;
    const organisation = organisationsById.get(asset.organisationId)!;
    const stream = `rewardasset-${asset.assetId}`;
    const userMetadata = (): EventMetadata => {
      const requestId = random.uuid();
      return { organisationId: organisation.id, actor: `user:${asset.userId}`, causationId: requestId, correlationId: requestId, occurredAt: iso(now) };
    };
    timers.add(Date.parse(asset.occurredAt) + random.int(HOUR, 5 * DAY), () => {
      append(
        stream,
        { type: 'RewardAssetClaimed', data: { assetId: asset.assetId, organisationId: organisation.id, userId: asset.userId, claimedAt: iso(now) } },
        userMetadata(),
      );
      if (!random.chance(0.4)) return;
      timers.add(now + random.int(10 * MINUTE, 2 * DAY), () =>
        append(
          stream,
          {
            type: 'RewardAssetRedeemed',
            data: { assetId: asset.assetId, organisationId: organisation.id, userId: asset.userId, redeemedAt: iso(now), information: [] },
          },
          userMetadata(),
        ),
      );
    });
  }

  /** Appends the engine's batch and moves the standings by its facts, as the standings read model does. */
  function flushEngine(at: number): void {
    if (engine.size === 0) return;
    const batch = engine;
    engine = new EngineBatch();
    for (const { event } of batch.flush(sink, at)) {
      byType[event.type] = (byType[event.type] ?? 0) + 1;
      countFact(event);
    }
  }

  function countFact(event: StoreEvent): void {
    let moves: { metric: MetricType; amount: number; mark?: (timeZone: string) => string }[];
    switch (event.type) {
      case 'XpEarned':
        if (event.data.source.kind === 'leaderboard') return;
        moves = [{ metric: 'total-xp', amount: event.data.amount }];
        break;
      case 'ActionCompleted': {
        const at = event.data.occurredAt;
        moves = [
          { metric: 'total-actions-completed', amount: 1 },
          { metric: 'qualifying-active-days', amount: 1, mark: (timeZone) => cachedLocal(localDate, at, timeZone) },
          { metric: 'consistent-weeks', amount: 1, mark: (timeZone) => cachedLocal(isoWeekOf, at, timeZone) },
        ];
        break;
      }
      case 'ChallengeStarted':
        moves = [{ metric: 'total-challenges-started', amount: 1 }];
        break;
      case 'ChallengeCompleted': {
        const challengeId = event.data.challengeId;
        moves = [
          { metric: 'total-challenges-completed', amount: 1 },
          { metric: 'unique-challenges-completed', amount: 1, mark: () => challengeId },
        ];
        break;
      }
      default:
        return;
    }
    const { organisationId, communityId, userId, occurredAt } = event.data;
    const organisation = organisationsById.get(organisationId)!;
    const user = usersById.get(userId)!;
    for (const board of organisation.leaderboards) {
      const move = moves.find((candidate) => candidate.metric === board.metricType);
      if (!move) continue;
      const qualifies = board.conditions.every((condition) =>
        condition.type === 'community' ? condition.communityId === communityId : user.variables[condition.variableConfigId] === condition.value,
      );
      if (!qualifies) continue;
      const window = windowOf(board, occurredAt);
      if (!window) continue;
      const scores = board.tallies.get(window.start) ?? new Map<string, Tally>();
      board.tallies.set(window.start, scores);
      const tally = scores.get(userId) ?? { score: 0, reachedAt: occurredAt, marks: new Set<string>() };
      scores.set(userId, tally);
      if (move.mark) {
        const mark = move.mark(organisation.timeZone);
        if (tally.marks.has(mark)) continue;
        tally.marks.add(mark);
      }
      tally.score += move.amount;
      if (occurredAt > tally.reachedAt) tally.reachedAt = occurredAt;
    }
  }

  function windowOf(board: Board, at: string): Window | null {
    const last = board.lastWindow;
    if (last && last.start <= at && (last.end === null || at < last.end)) return last;
    const window = leaderboardWindowAt(board, board.organisation.timeZone, at);
    if (window) board.lastWindow = window;
    return window;
  }

  /** A window closes once: its standings frozen from the scores, then the engine pays its rank rewards. */
  function closeWindow(board: Board, window: Window): void {
    const organisation = board.organisation;
    const scores = board.tallies.get(window.start);
    board.tallies.delete(window.start);
    const standings: FrozenStanding[] = rankStandings(
      [...(scores ?? new Map<string, Tally>())].map(([userId, tally]) => ({ userId, score: tally.score, reachedAt: tally.reachedAt })),
    );
    const jobId = `leaderboard-window-close:${board.id}:${Date.parse(window.start)}`;
    const stream = `leaderboardwindow-${board.id}-${Date.parse(window.start)}`;
    const closedAt = iso(now);
    const id = append(
      stream,
      {
        type: 'LeaderboardWindowClosed',
        data: { leaderboardId: board.id, organisationId: organisation.id, windowStart: window.start, windowEnd: window.end!, closedAt, standings },
      },
      { organisationId: organisation.id, actor: `job:${jobId}`, causationId: jobId, occurredAt: closedAt },
    );
    summary.windowsClosed++;
    payRankRewards(board, window, standings, { id, organisationId: organisation.id, correlationId: id });
    flushEngine(now + ENGINE_DELAY);
    const next = nextWindow(board, organisation.timeZone, window);
    if (next?.end) timers.add(Date.parse(next.end) + SETTLEMENT + random.int(0, 30_000), () => closeWindow(board, next));
  }

  function payRankRewards(board: Board, window: Window, standings: FrozenStanding[], cause: Cause): void {
    const facts: EngagementEvent[] = [];
    const supplies = new Map<string, AllocationSupply>();
    for (const tier of board.rewards) for (const allocation of tier.rewardsConfig.allocations) supplies.set(allocation.id, allocations.get(allocation.id)!);
    const paid: AllocationDistributedEvent[] = [];
    for (const tier of board.rewards) {
      for (const standing of standings.filter((s) => s.rank >= tier.startRank && s.rank <= tier.endRank)) {
        const communityId = board.communityId ?? usersById.get(standing.userId)!.lastActive?.communityId;
        if (!communityId) continue;
        const who: Who = { organisationId: board.organisation.id, communityId, userId: standing.userId, occurredAt: window.end! };
        const source: PayoutSource = {
          kind: 'leaderboard',
          leaderboardId: board.id,
          windowStart: window.start,
          startRank: tier.startRank,
          endRank: tier.endRank,
          rank: standing.rank,
        };
        facts.push(...ledgerEvents(who, tier.pointsToDistribute, tier.bonusXpToDistribute, LEADERBOARD_XP_CATEGORY, source));
        paid.push(...distributeEntry(supplies, tier, who, source));
      }
    }
    for (const [allocationId, supply] of supplies) allocations.set(allocationId, { ...allocations.get(allocationId)!, ...supply });
    engine.facts(`leaderboardpayout-${board.id}-${Date.parse(window.start)}`, facts, cause);
    for (const distribution of paid) handOut(board.organisation, distribution, cause, cause.id);
  }

  function drawGiveaway(organisation: Organisation, rewardId: string): void {
    const reward = organisation.rewards.get(rewardId)!;
    const entrants = [...(entries.get(rewardId) ?? new Map<string, number>())]
      .filter(([, count]) => count > 0)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([userId, count]) => ({ userId, entries: count }));
    const seed = random.word() + random.word() + random.word() + random.word();
    const winners = drawWinners(entrants, reward.supply, seed).map((userId) => ({ userId, assetId: random.id(now) }));
    const jobId = `giveaway-draw:${rewardId}:${Date.parse(reward.drawsAt!)}`;
    const drawnAt = iso(now);
    const id = append(
      `reward-${rewardId}`,
      { type: 'GiveawayDrawn', data: { rewardId, organisationId: organisation.id, communityId: reward.communityId, drawnAt, seed, entrants, winners } },
      { organisationId: organisation.id, actor: `job:${jobId}`, causationId: jobId, correlationId: jobId, occurredAt: drawnAt },
    );
    summary.giveawaysDrawn++;
    const cause: Cause = { id, organisationId: organisation.id, correlationId: jobId };
    for (const winner of winners) {
      grant(
        {
          organisationId: organisation.id,
          communityId: reward.communityId,
          userId: winner.userId,
          occurredAt: drawnAt,
          assetId: winner.assetId,
          rewardId,
          allocationId: null,
          eventSourceId: id,
          ...assetTerms(reward),
          code: null,
        },
        cause,
      );
    }
    flushEngine(now + ENGINE_DELAY);
  }
}

/** Local dates and weeks by hour: every zone used here is a whole number of hours from UTC. */
const localCache = new Map<string, string>();
function cachedLocal(of: (instant: string, timeZone: string) => string, instant: string, timeZone: string): string {
  const hour = Math.floor(Date.parse(instant) / HOUR);
  const key = `${of.name} ${timeZone} ${hour}`;
  let value = localCache.get(key);
  if (value === undefined) {
    value = of(iso(hour * HOUR), timeZone);
    localCache.set(key, value);
  }
  return value;
}
