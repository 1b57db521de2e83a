// Bulk replay in the browser, the spec's way: list the events of the filter (one request), then
// replay each one separately, PAUSE_MS apart, showing progress; Cancel stops before the next
// event; the end shows a summary (replayed, expired, failed). Each replay is a POST to the
// dashboard carrying the session's CSRF token; the server keeps no job. When the service asks
// to slow down (429) or is unavailable (503), the same event is tried again after its
// Retry-After (or 1, 2, 4, 8 s), at most RETRIES times; then the run stops, nothing is counted
// failed for it, and the summary says where it stopped.
"use strict";
const PAUSE_MS = 100;
const RETRIES = 4;
const MAX_WAIT_S = 60;

/** Seconds of a Retry-After header (a number or an HTTP date), or null. */
function retryAfterSeconds(res) {
  const value = res.headers.get("retry-after");
  if (!value) return null;
  const seconds = /^\d+$/.test(value.trim()) ? Number(value) : Math.ceil((Date.parse(value) - Date.now()) / 1000);
  return Number.isFinite(seconds) ? Math.min(MAX_WAIT_S, Math.max(1, seconds)) : null;
}

document.addEventListener("DOMContentLoaded", () => {
  const root = document.getElementById("bulk-replay");
  if (!root) return;
  const $ = (id) => document.getElementById(id);
  const start = $("bulk-start");
  const cancel = $("bulk-cancel");
  const progress = $("bulk-progress");
  const status = $("bulk-status");
  const csrf = JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRF-Token"] || "";
  let cancelled = false;
  start.hidden = false;

  /** Waits `ms`, or less when Cancel is pressed meanwhile. */
  const sleep = async (ms) => {
    const until = Date.now() + ms;
    while (!cancelled && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, Math.min(100, until - Date.now())));
  };

  cancel.addEventListener("click", () => {
    cancelled = true;
    cancel.disabled = true;
    status.textContent = "Cancelling: no further event will be replayed.";
  });

  /** Replays one event: `{answer, res}`, or `{stop}` with the reason to stop the run. */
  async function replayOne(eventId, index, total) {
    const body = new URLSearchParams({ event_id: eventId, target_url: root.dataset.targetUrl, webhook_id: root.dataset.webhookId });
    for (let attempt = 0; ; attempt++) {
      let res;
      try {
        res = await fetch("/dashboard/bulk-replay/replay", {
          method: "POST",
          body,
          headers: { "x-csrf-token": csrf, accept: "application/json" },
          credentials: "same-origin",
        });
      } catch (error) {
        // No answer: the replay may or may not have been accepted, so it is not sent again.
        return { stop: `the dashboard could not be reached (${error.message}); look at event ${eventId} before replaying it again` };
      }
      if (res.status === 401) return { stop: "your session has ended: sign in again" };
      if (res.status === 403) return { stop: "the dashboard refused the request: reload the page" };
      if (res.status !== 429 && res.status !== 503) {
        const answer = res.headers.get("content-type")?.includes("json") ? await res.json() : null;
        return { answer, res };
      }
      if (attempt >= RETRIES) {
        const how = res.status === 429 ? "kept asking to slow down" : "stayed unavailable";
        return { stop: `the service ${how} (HTTP ${res.status}) through ${RETRIES} retries; try the rest later` };
      }
      const wait = retryAfterSeconds(res) ?? 2 ** attempt;
      const why = res.status === 429 ? "asked to slow down" : "is unavailable";
      status.textContent = `The service ${why}: waiting ${wait} s before trying event ${index + 1} of ${total} again…`;
      await sleep(wait * 1000);
      if (cancelled) return { cancelled: true };
    }
  }

  start.addEventListener("click", async () => {
    start.hidden = true;
    cancel.hidden = false;
    status.textContent = "Listing the events…";
    const counts = { replayed: 0, expired: 0, failed: 0 };
    const problems = [];
    let ids;
    try {
      const listed = await fetch(`/dashboard/bulk-replay/ids?${root.dataset.query}`, {
        headers: { accept: "application/json" },
        credentials: "same-origin",
      });
      if (!listed.ok)
        throw new Error(listed.status === 401 ? "your session has ended: sign in again" : `listing failed (HTTP ${listed.status})`);
      ids = (await listed.json()).ids;
    } catch (error) {
      status.textContent = `Nothing was replayed: ${error.message}.`;
      cancel.hidden = true;
      return;
    }
    progress.max = ids.length;
    progress.value = 0;
    progress.hidden = false;
    let stoppedBy = null;
    for (const [index, eventId] of ids.entries()) {
      if (cancelled) break;
      if (index > 0) await sleep(PAUSE_MS);
      if (cancelled) break;
      status.textContent = `Replaying ${index + 1} of ${ids.length}…`;
      const result = await replayOne(eventId, index, ids.length);
      if (result.cancelled) break;
      if (result.stop) {
        stoppedBy = result.stop;
        break;
      }
      const outcome = result.answer?.outcome ?? "failed";
      counts[outcome] = (counts[outcome] ?? 0) + 1;
      if (outcome !== "replayed") problems.push(`${eventId}: ${result.answer?.message ?? `HTTP ${result.res.status}`}`);
      progress.value = index + 1;
    }
    cancel.hidden = true;
    const done = counts.replayed + counts.expired + counts.failed;
    status.textContent = stoppedBy
      ? `Stopped after ${done} of ${ids.length}: ${stoppedBy}.`
      : cancelled
        ? `Cancelled after ${done} of ${ids.length} events.`
        : `Done: ${ids.length} event${ids.length === 1 ? "" : "s"} handled.`;
    $("bulk-replayed").textContent = String(counts.replayed);
    $("bulk-expired").textContent = String(counts.expired);
    $("bulk-failed").textContent = String(counts.failed);
    const list = $("bulk-problems");
    for (const line of problems.slice(0, 50)) {
      const item = document.createElement("li");
      item.textContent = line;
      list.append(item);
    }
    $("bulk-summary").hidden = false;
  });
});
