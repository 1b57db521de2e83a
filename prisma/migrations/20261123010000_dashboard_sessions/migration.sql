-- The dashboard's sign-in (CONTRACT.md section 4a): one-time links and the sessions they open.
-- Only SHA-256 hashes of their tokens are stored. Both belong to the API key that made the link:
-- a session ends when that key is revoked, and the dashboard's replays carry that key's id.

-- A link works once (used_at), within 15 minutes of its creation (expires_at).
CREATE TABLE "dashboard_links" (
    "token_hash" TEXT NOT NULL,
    "account_id" TEXT NOT NULL,
    "api_key_id" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "used_at" TIMESTAMPTZ(3),

    CONSTRAINT "dashboard_links_pkey" PRIMARY KEY ("token_hash")
);
CREATE INDEX "dashboard_links_api_key_id_idx" ON "dashboard_links"("api_key_id");

-- A session lives while it is used (idle expiry from last_seen_at) and until signed out (ended_at).
CREATE TABLE "dashboard_sessions" (
    "id" TEXT NOT NULL,
    "account_id" TEXT NOT NULL,
    "api_key_id" TEXT NOT NULL,
    "token_hash" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "last_seen_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "ended_at" TIMESTAMPTZ(3),

    CONSTRAINT "dashboard_sessions_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "dashboard_sessions_token_hash_key" ON "dashboard_sessions"("token_hash");
CREATE INDEX "dashboard_sessions_api_key_id_idx" ON "dashboard_sessions"("api_key_id");

ALTER TABLE "dashboard_links" ADD CONSTRAINT "dashboard_links_api_key_id_fkey" FOREIGN KEY ("api_key_id") REFERENCES "api_keys"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "dashboard_sessions" ADD CONSTRAINT "dashboard_sessions_api_key_id_fkey" FOREIGN KEY ("api_key_id") REFERENCES "api_keys"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
