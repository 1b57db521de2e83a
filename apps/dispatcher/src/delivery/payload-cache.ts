import { getHeapStatistics } from "node:v8";
import type { PayloadRef } from "@mailhooks/delivery-state";

/**
 * Bytes in flight are bounded in the dispatcher (issue 17 item 2). Payloads up to
 * INLINE_PAYLOAD_BYTES come with their attempt's batched read; a larger one (up to 10 MiB,
 * docs/api.md, "Events") is read once per event and shared by every attempt of that event (its
 * webhooks, its retries, its replays) as one Buffer, which is what is signed and written to each
 * receiver's socket without a copy. The shared payloads held or kept together stay within
 * `budgetBytes`: an attempt whose payload is not held waits for room before reading it (first
 * come, first served); payloads nobody holds any more are kept while they fit, for the next
 * attempts of their event, and dropped, oldest first, to make room. One payload larger than the
 * whole budget is read once nothing else is held.
 */
export interface PayloadCache {
  /**
   * The envelope bytes of `ref` (the inline payload, or the shared Buffer), held until
   * `release()`; null when the payload is purged.
   * @throws whatever reading it from PostgreSQL threw (nothing stays held)
   */
  acquire(ref: PayloadRef): Promise<HeldPayload | null>;
  /** Bytes of shared payloads held or kept now. */
  usedBytes(): number;
}

export interface HeldPayload {
  body: string | Buffer;
  release: () => void;
}

/**
 * The default budget: a sixth of the V8 heap limit (`--max-old-space-size`), between 16 MiB and
 * 256 MiB: with the shipped 128 MB heap about 23 MiB, two 10 MiB payloads at once (read a slice
 * at a time into their Buffer, see loadPayload).
 */
export function defaultPayloadBudgetBytes(): number {
  return Math.min(256 * 2 ** 20, Math.max(16 * 2 ** 20, Math.floor(getHeapStatistics().heap_size_limit / 6)));
}

interface Entry {
  bytes: number;
  holders: number;
  body: Promise<Buffer | null>;
}

/** A PayloadCache reading payloads with `load` (loadPayload of @mailhooks/delivery-state). */
export function createPayloadCache(
  load: (eventId: string) => Promise<Buffer | string | null>,
  budgetBytes = defaultPayloadBudgetBytes(),
): PayloadCache {
  // Map order is recency: an entry is moved to the end each time it is held.
  const entries = new Map<string, Entry>();
  const waiters: { bytes: number; wake: () => void }[] = [];
  let used = 0;

  const drop = (eventId: string, entry: Entry) => {
    if (entries.get(eventId) !== entry) return;
    entries.delete(eventId);
    used -= entry.bytes;
  };
  /** Drops idle payloads, oldest first, until `bytes` more fit; whether they do (or nothing is held). */
  const makeRoom = (bytes: number): boolean => {
    for (const [eventId, entry] of entries) {
      if (used + bytes <= budgetBytes) break;
      if (entry.holders === 0) drop(eventId, entry);
    }
    return used + bytes <= budgetBytes || used === 0;
  };
  /** Wakes the waiters that fit now, in order, each with its bytes already counted. */
  const wakeWaiters = () => {
    while (waiters.length > 0 && makeRoom(waiters[0].bytes)) {
      const waiter = waiters.shift()!;
      used += waiter.bytes;
      waiter.wake();
    }
  };

  const hold = async (eventId: string, entry: Entry): Promise<HeldPayload | null> => {
    entry.holders++;
    entries.delete(eventId);
    entries.set(eventId, entry);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      entry.holders--;
      wakeWaiters();
    };
    try {
      const body = await entry.body;
      if (body === null) {
        release();
        drop(eventId, entry);
        return null;
      }
      return { body, release };
    } catch (error) {
      release();
      drop(eventId, entry);
      wakeWaiters();
      throw error;
    }
  };

  return {
    usedBytes: () => used,
    acquire: async (ref) => {
      if (ref.payloadBytes === null) return null;
      if (ref.payload !== null) return { body: ref.payload, release: () => undefined };
      const bytes = ref.payloadBytes;
      const cached = entries.get(ref.eventId);
      if (cached) return hold(ref.eventId, cached);
      if (waiters.length === 0 && makeRoom(bytes)) used += bytes;
      else {
        // Woken with its bytes counted (see wakeWaiters).
        await new Promise<void>((wake) => waiters.push({ bytes, wake }));
        const readMeanwhile = entries.get(ref.eventId);
        if (readMeanwhile) {
          used -= bytes;
          wakeWaiters();
          return hold(ref.eventId, readMeanwhile);
        }
      }
      const entry: Entry = {
        bytes,
        holders: 0,
        body: load(ref.eventId).then((bytes) => (typeof bytes === "string" ? Buffer.from(bytes, "utf8") : bytes)),
      };
      entries.set(ref.eventId, entry);
      return hold(ref.eventId, entry);
    },
  };
}
