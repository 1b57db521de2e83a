import { z } from "zod";
import { errorBodySchema } from "./errors.js";

/** GET /healthz and GET /readyz (CONTRACT.md section 8). */

export const healthSchema = z.object({ status: z.literal("ok") }).meta({ id: "Health" });

const checks = z
  .object({ postgres: z.enum(["ok", "unavailable"]), redis: z.enum(["ok", "unavailable"]) })
  .meta({ id: "ReadinessChecks", description: "the state of each backing service; Redis being away does not make the API unready (accepted work waits for it)" });

export const readySchema = z.object({ status: z.literal("ready"), checks }).meta({ id: "Ready" });
export const notReadySchema = errorBodySchema.extend({ checks }).meta({ id: "NotReady" });
