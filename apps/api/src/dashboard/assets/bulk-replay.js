// Bulk replay in the browser, the spec's way: list the events of the filter (one request), then
// replay each one separately, PAUSE_MS apart, showing progress; Cancel stops before the next
// event; the end shows a summary (replayed, expired, failed). Each replay is a POST to the
// dashboard carrying the session's CSRF token; the server keeps no job.
"use strict";
const PAUSE_MS = 100;

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

  cancel.addEventListener("click", () => {
    cancelled = true;
    cancel.disabled = true;
    status.textContent = "Cancelling: no further event will be replayed.";
  });

  start.addEventListener("click", async () => {
    start.hidden = true;
    cancel.hidden = false;
    status.textContent = "Listing the events…";
    const counts = { replayed: 0, expired: 0, failed: 0 };
    const problems = [];
    let ids;
    try {
      const listed = await fetch(`/dashboard/bulk-replay/ids?${root.dataset.query}`, { headers: { accept: "application/json" }, credentials: "same-origin" });
      if (!listed.ok) throw new Error(listed.status === 401 ? "your session has ended: sign in again" : `listing failed (HTTP ${listed.status})`);
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
      if (index > 0) await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
      if (cancelled) break;
      status.textContent = `Replaying ${index + 1} of ${ids.length}…`;
      const body = new URLSearchParams({ event_id: eventId, target_url: root.dataset.targetUrl, webhook_id: root.dataset.webhookId });
      try {
        const res = await fetch("/dashboard/bulk-replay/replay", { method: "POST", body, headers: { "x-csrf-token": csrf, accept: "application/json" }, credentials: "same-origin" });
        if (res.status === 401 || res.status === 403) {
          stoppedBy = res.status === 401 ? "your session has ended: sign in again" : "the dashboard refused the request: reload the page";
          break;
        }
        const answer = res.headers.get("content-type")?.includes("json") ? await res.json() : null;
        const outcome = answer?.outcome ?? "failed";
        counts[outcome] = (counts[outcome] ?? 0) + 1;
        if (outcome !== "replayed") problems.push(`${eventId}: ${answer?.message ?? `HTTP ${res.status}`}`);
      } catch (error) {
        counts.failed++;
        problems.push(`${eventId}: ${error.message}`);
      }
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
