import { PrismaPg } from "@prisma/adapter-pg";
import { PrismaClient } from "./generated/prisma/client.js";

/**
 * Creates the Prisma client of a process over node-postgres (`@prisma/adapter-pg`, no native
 * engine). `poolSize` is the maximum number of PostgreSQL connections it opens.
 */
export function createPrismaClient(databaseUrl: string, poolSize = 10): PrismaClient {
  const adapter = new PrismaPg({ connectionString: databaseUrl, max: poolSize, connectionTimeoutMillis: 5_000 });
  return new PrismaClient({ adapter });
}

export type { PrismaClient };
