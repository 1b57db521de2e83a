import { decide, type Candidate, type Decision } from "@mailhooks/scheduler";

/** What the claim's first statement (claim.ts, prepareStatement) answers: one JSON value. */
export interface ClaimState {
  now_ms: number;
  slots: number;
  reserve: number;
  /** How many webhooks of the round the statement reads at most. */
  round_limit: number;
  leases: { webhook_id: string; account_id: string; leases: number; reserved: number; answering: boolean }[];
  round: {
    webhook_id: string;
    account_id: string;
    status: Candidate["status"];
    mode: Candidate["mode"];
    rate_limit: number | null;
    turn_at_ms: number | null;
    bypass_waiting: boolean;
    failing: boolean;
    answering: boolean;
  }[];
  poisoned: { kind: string; work_id: string }[];
}

/** What `decide` (@mailhooks/scheduler) says of the state the first statement read. */
export function decideFor(state: ClaimState): Decision {
  return decide({
    now: state.now_ms,
    slots: state.slots,
    reserve: state.reserve,
    leases: state.leases.map((l) => ({
      webhookId: l.webhook_id,
      accountId: l.account_id,
      leases: l.leases,
      reserved: l.reserved,
      answering: l.answering,
    })),
    candidates: state.round.map((c) => ({
      webhookId: c.webhook_id,
      accountId: c.account_id,
      status: c.status,
      mode: c.mode,
      rateLimit: c.rate_limit,
      turnAt: c.turn_at_ms,
      bypassWaiting: c.bypass_waiting,
      failing: c.failing,
      answering: c.answering,
    })),
  });
}
