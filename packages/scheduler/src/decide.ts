/**
 * The one decision of the delivery core (docs/scheduler.md): which webhooks' waiting work may
 * start now, and how much of it. A pure function of what the claim read, in one transaction, under
 * the deployment's claim lock: the dispatchers' slots, the live leases, and the webhooks in the
 * round. Every path to an attempt (new work, a retry that fell due, a replay, a test, work whose
 * holder died) passes here, and nothing else admits work.
 *
 * The rules, with S the slots of the live dispatchers and R their reserve slots. A slot runs one
 * attempt and may hold one job ready behind it (claimed, waiting in Redis), so that an attempt's
 * end starts the next one at once, without waiting for a claim; the reserve slots are a lane of
 * their own (their own jobs and worker), so nothing the slots hold can stand in their way:
 * - **Fair share.** Idle slots (S minus the slots' lane's leases) go one lease at a time to the
 *   waiting webhook whose account holds the fewest leases, then which itself holds the fewest
 *   (max-min fairness: accounts first, then their webhooks), ties in the order of the round.
 *   Alone, one webhook takes every slot; beside others, a webhook that holds many leases gets
 *   none of the slots that free until the others have as many. Only leased work counts: work
 *   waiting for its retry holds nothing. A failing webhook (its last attempt failed: a receiver
 *   that hangs, refuses or errs) counts as holding one lease at least, so that a healthy webhook
 *   wins a tie with it.
 * - **The reserve.** A webhook that found no idle slot, holds no lease and is not failing may take
 *   one of the R reserve slots (their own lane), so that a healthy webhook with nothing running
 *   starts at once whatever others hold. An account takes at most its share of the reserve:
 *   R / (accounts holding reserve leases, itself included, + 1), at least one, so that many new
 *   webhooks of one account that all start hanging leave the rest to the other accounts until
 *   their first attempts fail.
 * - **Ready jobs.** Then, by the same fair share, jobs ready behind the running attempts, so that
 *   an attempt's end starts the next at once, without waiting for a claim. The slots' lane holds
 *   at most 2 S in weight: a lease of a `quick` webhook (its last attempts were answered 2xx within
 *   QUICK_ANSWER_MS) weighs 1, any other 2, so ready jobs only wait behind quick attempts and never
 *   outnumber them: behind a webhook that answers slowly, hangs or fails, a job would wait out the
 *   attempt, while the reserve or the next claim starts it sooner. They wait in the order of their
 *   account's load (`priority`): a slot that frees starts the least loaded account's first.
 * - **rate_limit.** A webhook with `rate_limit` r starts at most one attempt per 1.15 / r s
 *   (rateIntervalMs; GCRA on PostgreSQL's clock, the claim's `now`). Turns missed while the relay
 *   was busy are made up for CATCH_UP_MS at most.
 * - **Pause and listen.** A paused webhook starts nothing but replays to a target_url, and
 *   neither does a listen webhook, whose developer pulls the rest (docs/develop-locally.md). What
 *   they hold back waits in the queue, parked out of the round until a change of the webhook puts
 *   them back. A disabled listen webhook's leftovers (replays, tests) are claimed, to be ended.
 */

/** A webhook of the round, as the claim read it. */
export interface Candidate {
  webhookId: string;
  accountId: string;
  status: "enabled" | "paused" | "disabled";
  mode: "push" | "listen";
  /** Requests per second at most; null: no limit. */
  rateLimit: number | null;
  /** Its next rate_limit turn (ms since the epoch, PostgreSQL's clock); null: none taken yet. */
  turnAt: number | null;
  /** Whether a replay to a target_url of it waits (what a paused or listen webhook still sends). */
  bypassWaiting: boolean;
  /** Its last attempt failed (and no success since). */
  failing: boolean;
  /** Its last attempts were answered 2xx within QUICK_ANSWER_MS (and it is not failing). */
  quick: boolean;
}

/** The live leases of one webhook. */
export interface LeaseCount {
  webhookId: string;
  accountId: string;
  leases: number;
  /** Of them, granted from the reserve. */
  reserved: number;
  /** Its last attempts were answered 2xx within QUICK_ANSWER_MS (Candidate.quick). */
  quick: boolean;
}

export interface DecisionInput {
  /** PostgreSQL's now, in ms since the epoch. */
  now: number;
  /** The live dispatchers' slots (S: attempts at once, each with one job ready behind it) and reserve slots (R). */
  slots: number;
  reserve: number;
  leases: LeaseCount[];
  /** The round, in its order (longest waiting first). */
  candidates: Candidate[];
}

/** Work a webhook may start now. */
export interface Grant {
  webhookId: string;
  /** How many of its waiting units, the longest due first. */
  count: number;
  /** Of them, from the reserve (the last ones taken). */
  reserved: number;
  /** Of them, jobs ready behind running attempts (taken after those starting at once, before the reserved). */
  ready: number;
  /**
   * The order of its ready jobs in Redis (BullMQ priority: lower first): 1 + the leases its account
   * held before this decision, at most MAX_PRIORITY. Jobs starting at once carry none.
   */
  priority: number;
  /** Only replays to a target_url (the webhook is paused, or a listen webhook). */
  bypassOnly: boolean;
  /** Its next rate_limit turn once these start (ms); null without a limit. */
  turnAt: number | null;
}

/** A webhook of the round that may not start anything now, and until when. */
export interface Parked {
  webhookId: string;
  /** Its next rate_limit turn (ms); null: until a change of the webhook (resume, a new mode). */
  until: number | null;
}

export interface Decision {
  grants: Grant[];
  parked: Parked[];
  /** Webhooks of the round that could have started work but found no slot. */
  unserved: number;
}

/**
 * How many turns missed while nobody claimed are made up, in ms of turns. A rate_limit's spacing
 * has 15 % of room (rateIntervalMs), 150 ms in each second, for the jitter between a turn and
 * its request reaching the receiver; 100 ms of turns made up at once stay within that room, so r
 * requests at most still arrive in any one second.
 */
export const CATCH_UP_MS = 100;

/**
 * Spacing of a rate-limited webhook's attempts, in ms: 1.15 s / r. The 15 % leave room for the
 * jitter between an attempt's turn and its request reaching the receiver (a claim, a queue, a
 * connection, a busy process): r turns span 1.15 s, so that up to 150 ms of jitter still puts at
 * most r requests in any one second at the receiver.
 */
export function rateIntervalMs(rateLimit: number): number {
  return 1150 / rateLimit;
}

/**
 * How soon a webhook's attempts must be answered 2xx for jobs to wait ready behind them, in ms
 * (the attempt's duration, as the deliveries log records it). A ready job saves the claim and the
 * fetch between an attempt's end and its slot's next attempt, a few round trips; it waits out the
 * attempt in front of it, whoever's job it is. Behind attempts this short, any job waits a quarter
 * of a second at most, which a person watching a live view barely notices; behind longer ones the
 * saving is small beside the attempt, and a job is better left to the reserve or the next claim.
 * It bounds a wait by the receivers' answers, not by this machine's speed.
 */
export const QUICK_ANSWER_MS = 250;

/** The largest BullMQ job priority (2^21). */
const MAX_PRIORITY = 2_097_152;

/** What a lease of a webhook weighs in the slots' lane: 1 when it is quick, else 2 (see the rules above). */
function leaseWeight(quick: boolean): number {
  return quick ? 1 : 2;
}

/** A candidate's state while the decision is made. */
interface Seat {
  candidate: Candidate;
  bypassOnly: boolean;
  /** Turns it may still take now (Infinity without a limit). */
  turns: number;
  /** Where its turns start (rate-limited only). */
  turnBase: number;
  granted: number;
  reserved: number;
  /** Of those granted, ready jobs (no slot idle for them: they wait behind running attempts). */
  ready: number;
  /** Leases it held before this decision (one at least when failing). */
  held: number;
}

/** The decision for one claim (see the rules above). */
export function decide(input: DecisionInput): Decision {
  const webhookLeases = new Map<string, number>();
  const accountLeases = new Map<string, number>();
  const accountReserved = new Map<string, number>();
  /** The slots' lane in use, in weight (reserve leases are a lane of their own). */
  let used = 0;
  let laneLeases = 0;
  let reservedLeases = 0;
  for (const l of input.leases) {
    webhookLeases.set(l.webhookId, (webhookLeases.get(l.webhookId) ?? 0) + l.leases);
    accountLeases.set(l.accountId, (accountLeases.get(l.accountId) ?? 0) + l.leases);
    if (l.reserved > 0) accountReserved.set(l.accountId, (accountReserved.get(l.accountId) ?? 0) + l.reserved);
    used += (l.leases - l.reserved) * leaseWeight(l.quick);
    laneLeases += l.leases - l.reserved;
    reservedLeases += l.reserved;
  }

  const startLeases = new Map(accountLeases);
  const parked: Parked[] = [];
  const seats: Seat[] = [];
  for (const candidate of input.candidates) {
    const holdsBack = candidate.status === "paused" || (candidate.mode === "listen" && candidate.status !== "disabled");
    if (holdsBack && !candidate.bypassWaiting) {
      parked.push({ webhookId: candidate.webhookId, until: null });
      continue;
    }
    let turns = Infinity;
    let turnBase = input.now;
    if (candidate.rateLimit !== null) {
      turnBase = Math.max(candidate.turnAt ?? -Infinity, input.now - CATCH_UP_MS);
      if (turnBase > input.now) {
        parked.push({ webhookId: candidate.webhookId, until: turnBase });
        continue;
      }
      turns = Math.floor((input.now - turnBase) / rateIntervalMs(candidate.rateLimit)) + 1;
    }
    const leases = webhookLeases.get(candidate.webhookId) ?? 0;
    const held = candidate.failing ? Math.max(1, leases) : leases;
    seats.push({ candidate, bypassOnly: holdsBack, turns, turnBase, granted: 0, reserved: 0, ready: 0, held });
  }

  // 1. Fair share of the idle slots (the lane's leases fewer than S): these start at once.
  // 2. The reserve, to webhooks that hold nothing and found no idle slot.
  // 3. Fair share of the rest of the lane's room: jobs ready behind the running attempts, in Redis
  //    in the order of their account's load (priority), so that a slot that frees starts the
  //    least loaded account's first.
  let room = 2 * input.slots - used;
  let idle = input.slots - laneLeases;
  const load = (seat: Seat) => [accountLeases.get(seat.candidate.accountId) ?? 0, seat.held + seat.granted] as const;
  const share = (ready: boolean) => {
    while (room > 0 && (ready || idle > 0)) {
      let best: Seat | undefined;
      for (const seat of seats) {
        if (seat.granted >= seat.turns || leaseWeight(seat.candidate.quick) > room) continue;
        if (!best) best = seat;
        else {
          const [a, w] = load(seat);
          const [bestA, bestW] = load(best);
          if (a < bestA || (a === bestA && w < bestW)) best = seat;
        }
      }
      if (!best) break;
      if (ready) best.ready++;
      best.granted++;
      accountLeases.set(best.candidate.accountId, (accountLeases.get(best.candidate.accountId) ?? 0) + 1);
      room -= leaseWeight(best.candidate.quick);
      idle--;
    }
  };
  share(false);

  let reserveFree = input.reserve - reservedLeases;
  for (const seat of seats) {
    if (reserveFree <= 0) break;
    if (seat.held > 0 || seat.granted > 0 || seat.turns < 1) continue;
    const account = seat.candidate.accountId;
    const holders = new Set(accountReserved.keys());
    holders.add(account);
    const accountShare = Math.max(1, Math.floor(input.reserve / (holders.size + 1)));
    if ((accountReserved.get(account) ?? 0) >= accountShare) continue;
    seat.granted++;
    seat.reserved++;
    accountLeases.set(account, (accountLeases.get(account) ?? 0) + 1);
    accountReserved.set(account, (accountReserved.get(account) ?? 0) + 1);
    reserveFree--;
  }

  share(true);

  const grants: Grant[] = [];
  let unserved = 0;
  for (const seat of seats) {
    if (seat.granted === 0) {
      unserved++;
      continue;
    }
    const { rateLimit } = seat.candidate;
    grants.push({
      webhookId: seat.candidate.webhookId,
      count: seat.granted,
      reserved: seat.reserved,
      ready: seat.ready,
      priority: Math.min(MAX_PRIORITY, 1 + (startLeases.get(seat.candidate.accountId) ?? 0)),
      bypassOnly: seat.bypassOnly,
      turnAt: rateLimit === null ? null : seat.turnBase + seat.granted * rateIntervalMs(rateLimit),
    });
  }
  return { grants, parked, unserved };
}
