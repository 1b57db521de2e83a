import { z } from "zod";
import type { ZodOpenApiPathsObject } from "zod-openapi";
import { resourceId } from "../../routes/webhooks.js";
import { deliverySchema } from "../../schemas/deliveries.js";
import { pendingListSchema } from "../../schemas/pending.js";
import { pendingAnswerSchema, pendingQuerySchema } from "../../services/pending.js";
import { errorResponses, JSON_BODY_ERRORS } from "../responses.js";
import { json } from "./media.js";

/** A listen webhook's pending deliveries (docs/develop-locally.md). */

const webhookPath = resourceId.meta({ description: "a listen webhook's id", example: "wh_019a2b3c4d5e7f00a1b2c3d4e5f60718" });

export const pendingPaths: ZodOpenApiPathsObject = {
  "/v1/webhooks/{id}/pending": {
    get: {
      operationId: "pullPendingDeliveries",
      tags: ["Webhooks"],
      summary: "Pull a listen webhook's pending deliveries",
      description:
        'For a webhook created with `url: null, mode: "listen"` (what `npm run listen` makes): its deliveries wait here, oldest first, until pulled. Answers at once when some wait, else within `wait` seconds, as soon as one comes. Each item is the exact body and the signed headers the webhook\'s scheme would send (signed now); POST what your receiver answered to /v1/webhooks/{id}/pending/{delivery_id}. An item not answered within 60 s is handed out again. An account may have 5 waiting pulls at once (per API process): past it, a pull that finds nothing waiting is 429. A paused webhook hands out nothing.',
      requestParams: { path: z.object({ id: webhookPath }), query: pendingQuerySchema },
      responses: {
        "200": { description: "the pulled deliveries (empty when none came within `wait`)", content: json(pendingListSchema) },
        ...errorResponses({
          404: true,
          409: "the webhook is not a listen webhook, or it is disabled",
          422: true,
          429: "too many requests, or the account's waiting pulls are all held and nothing waits",
        }),
      },
    },
  },
  "/v1/webhooks/{id}/pending/{delivery_id}": {
    post: {
      operationId: "answerPendingDelivery",
      tags: ["Webhooks"],
      summary: "Answer a pulled delivery",
      description:
        "Records what your receiver answered to a pulled delivery as its row of the deliveries log (its id is `delivery_id`; `url` null): a 2xx `status` delivers it; any other status, or an `error`, is retried on the schedule (10 s, 60 s, 300 s: the retry is pulled when due), and fails after the last. Repeating an answer already recorded answers the same row.",
      requestParams: {
        path: z.object({ id: webhookPath, delivery_id: resourceId.meta({ description: "the pulled item's `delivery_id`" }) }),
      },
      requestBody: {
        required: true,
        content: json(pendingAnswerSchema.meta({ id: "PendingAnswer", example: { status: 200, duration_ms: 12, response_body: "ok" } })),
      },
      responses: {
        "200": { description: "the delivery row written", content: json(deliverySchema) },
        ...errorResponses({
          ...JSON_BODY_ERRORS,
          404: "no pulled delivery of this id for this webhook",
          409: "it was not answered within 60 s of its pull: it was taken back, and is handed out again",
        }),
      },
    },
  },
};
