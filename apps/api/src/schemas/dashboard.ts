import { z } from "zod";
import { timestamp } from "./common.js";

/** POST /v1/dashboard-links (docs/dashboard.md). */
export const dashboardLinkSchema = z
  .object({
    url: z.string().meta({
      description: "an absolute one-time sign-in URL of the dashboard",
      example: "https://webhooks.example.com/dashboard/sign-in?token=…",
    }),
    expires_at: timestamp.meta({ description: "the link works once, until this time (15 minutes)" }),
  })
  .meta({ id: "DashboardLink" });
export type DashboardLinkView = z.infer<typeof dashboardLinkSchema>;
