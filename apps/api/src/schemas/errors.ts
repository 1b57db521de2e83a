import { z } from "zod";
import { ERROR_STATUS } from "../errors.js";

/** The error body of every answer that is not a success (docs/api.md, "Errors"). */
export const errorBodySchema = z
  .object({
    error: z.object({
      code: z
        .enum(Object.keys(ERROR_STATUS) as [keyof typeof ERROR_STATUS, ...(keyof typeof ERROR_STATUS)[]])
        .meta({ description: "stable, machine-readable; one per HTTP status" }),
      message: z.string().min(1).meta({ description: "for people; may change" }),
      details: z
        .array(
          z.object({
            path: z.string().meta({ description: "the offending field, e.g. `url` or `events.3.data.from` (empty for the whole body)" }),
            message: z.string(),
          }),
        )
        .optional()
        .meta({ description: "for validation errors: one item per problem" }),
    }),
  })
  .meta({
    id: "Error",
    example: {
      error: {
        code: "validation_error",
        message: "url: must be an absolute https:// URL",
        details: [{ path: "url", message: "must be an absolute https:// URL" }],
      },
    },
  });
