/**
 * The request bodies of the benchmark: message.sent events with unique messageIds that carry
 * their run and their request start time (see receiver.ts), alone or 100 to a batch.
 */

/** Wall-clock ms with sub-ms resolution, comparable across processes. */
export const now = () => performance.timeOrigin + performance.now();

/** A bench messageId: kind (ok, fail, floor, ...), run, index within it, request start (ms). */
export function benchMessageId(kind: string, runId: string, index: number, startMs: number): string {
  return `<${kind}-${runId}-${index}-${startMs.toFixed(3)}@bench>`;
}
/** Finds a bench messageId in a delivered body: [whole, kind, runId, index, startMs]. */
export const MESSAGE_ID = /"messageId":"<([a-z]+)-([A-Za-z0-9]+)-(\d+)-([\d.]+)@bench>"/;

export function eventItem(messageId: string) {
  return {
    event_type: "message.sent",
    data: {
      messageId,
      threadId: "thr_bench",
      inboxId: "bench@inbox.example.net",
      from: "bench@inbox.example.net",
      to: ["receiver@example.com"],
      subject: "Benchmark",
      status: "sent",
    },
  };
}

/** The body of POST /v1/events (and of the bare Express route: same bytes, same size). */
export function eventBody(kind: string, runId: string, index: number, startMs: number): string {
  return JSON.stringify(eventItem(benchMessageId(kind, runId, index, startMs)));
}

/** The body of POST /v1/events/batch: `size` events from `index` on. */
export function batchBody(kind: string, runId: string, index: number, size: number, startMs: number): string {
  return JSON.stringify({ events: Array.from({ length: size }, (_, i) => eventItem(benchMessageId(kind, runId, index + i, startMs))) });
}

/** A message.delivered event: the kind only the neighbour phase's hanging webhooks take. */
export function deliveredEventItem(messageId: string) {
  const { data } = eventItem(messageId);
  return { event_type: "message.delivered", data: { ...data, status: "delivered", deliveredAt: new Date().toISOString() } };
}

/** The body of POST /v1/events/batch of `size` message.delivered events from `index` on. */
export function deliveredBatchBody(runId: string, index: number, size: number, startMs: number): string {
  return JSON.stringify({
    events: Array.from({ length: size }, (_, i) => deliveredEventItem(benchMessageId("hang", runId, index + i, startMs))),
  });
}
