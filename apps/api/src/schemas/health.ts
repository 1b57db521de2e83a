import { z } from "zod";
import { errorBodySchema } from "./errors.js";

/** GET /healthz and GET /readyz (docs/api.md, "Service routes"). */

export const healthSchema = z.object({ status: z.literal("ok") }).meta({ id: "Health" });

const checks = z.object({ postgres: z.enum(["ok", "unavailable"]), redis: z.enum(["ok", "unavailable"]) }).meta({
  id: "ReadinessChecks",
  description: "the state of each backing service; Redis being away does not make the API unready (accepted work waits for it)",
});

/** What an operator must know about this process's configuration, whatever its readiness. */
const warnings = z
  .array(
    z
      .object({
        code: z.enum(["insecure_development_key"]),
        message: z.string(),
      })
      .meta({ id: "ReadinessWarning" }),
  )
  .optional()
  .meta({
    description:
      "present only when there is something to warn of. `insecure_development_key`: SECRET_ENCRYPTION_KEYS is unset (NODE_ENV is not production), so webhook secrets are encrypted with the public development key and anyone can decrypt them",
  });

export const readySchema = z.object({ status: z.literal("ready"), checks, warnings }).meta({ id: "Ready" });
export const notReadySchema = errorBodySchema.extend({ checks, warnings }).meta({ id: "NotReady" });
