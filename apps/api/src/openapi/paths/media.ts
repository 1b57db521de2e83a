import type { z } from "zod";

/** `content` of a JSON request or response body. */
export const json = (schema: z.ZodType) => ({ "application/json": { schema } });
