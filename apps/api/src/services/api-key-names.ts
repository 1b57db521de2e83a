import type { ApiDeps } from "../deps.js";

/** Labels of API keys, for the dashboard's audit log (entries name the key by id: docs/api.md, "Audit log"). */

/** Names of the account's keys among `keyIds`; null for a key without a label; other accounts' ids are absent. */
export async function apiKeyNames(deps: ApiDeps, accountId: string, keyIds: string[]): Promise<Map<string, string | null>> {
  if (keyIds.length === 0) return new Map();
  const keys = await deps.prisma.apiKey.findMany({
    where: { accountId, id: { in: [...new Set(keyIds)] } },
    select: { id: true, name: true },
  });
  return new Map(keys.map((k) => [k.id, k.name]));
}
