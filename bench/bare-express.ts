/**
 * The calibration target, run as its own process with the API's Node flags (bench/run.ts): a bare
 * Express 5 app with one route that parses a JSON body (express.json(), as the API does) and
 * answers 201 with a JSON object the size of the API's event summary. No database, no
 * authentication: what this machine's Node and Express can answer, measured by the same load
 * generator with the same settings as the ingest.
 */
import express from "express";

const app = express();
app.disable("x-powered-by");
app.post("/v1/events", express.json({ limit: "1mb" }), (req, res) => {
  const data = (req.body as { data?: { messageId?: string; inboxId?: string } }).data ?? {};
  const at = new Date().toISOString();
  res.status(201).json({
    event_id: "evt_019a2b3c4d5e7f00a1b2c3d4e5f60718",
    event_type: "message.sent",
    inbox_id: data.inboxId ?? "",
    status: "pending",
    occurred_at: at,
    created_at: at,
  });
});
app.get("/healthz", (_req, res) => {
  res.json({ status: "ok" });
});
const server = app.listen(Number(process.env.PORT), "127.0.0.1", () => process.send?.("ready"));
server.keepAliveTimeout = 120_000;
process.on("SIGTERM", () => server.close(() => process.exit(0)));
