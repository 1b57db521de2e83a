import { verifyEvent } from "./index.js";
import { unauthorizedBody } from "./errors.js";
import type { SecretInput, VerifyOptions } from "./arguments.js";
import type { WebhookEvent } from "./events.js";

/**
 * @mailhooks/verify/fastify: a Fastify 4/5 plugin. Typed structurally, so fastify is not a
 * dependency of this package.
 */

export type { WebhookErrorBody } from "./errors.js";

/** The parts of a Fastify request the plugin uses; `webhook` is set once verified. */
export interface FastifyRequestLike {
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  webhook?: WebhookEvent | null;
}

/** A request that passed the plugin: `request.webhook` is the verified event `{id, event, timestamp, data}`. */
export type VerifiedRequest<Req = FastifyRequestLike> = Req & { webhook: WebhookEvent };

export interface FastifyReplyLike {
  code(statusCode: number): FastifyReplyLike;
  send(payload?: unknown): FastifyReplyLike;
}

/** The parts of a Fastify instance the plugin uses. */
export interface FastifyInstanceLike {
  removeContentTypeParser(contentType: string): unknown;
  addContentTypeParser(
    contentType: string,
    options: { parseAs: "buffer"; bodyLimit?: number },
    parser: (request: never, body: Uint8Array, done: (error: Error | null, body?: unknown) => void) => void,
  ): unknown;
  hasRequestDecorator(name: string): boolean;
  decorateRequest(name: "webhook", value: null): unknown;
  addHook(name: "preValidation", hook: (request: FastifyRequestLike, reply: FastifyReplyLike) => Promise<unknown>): unknown;
}

export interface FastifyVerifyOptions extends VerifyOptions {
  /** The webhook secret, or the old and the new one during a rotation. */
  secret: SecretInput;
  /** Largest JSON body accepted, in bytes (default 25 MiB; Fastify's own default of 1 MiB is too small for inbound mail). */
  bodyLimit?: number;
}

const DEFAULT_BODY_LIMIT = 25 * 1024 * 1024;

/**
 * Plugin: in the scope it is registered in, `application/json` bodies are kept raw, every
 * request is verified before validation, and a verified one gets `request.webhook` set to the
 * event `{id, event, timestamp, data}` (`verifyEvent`; `id` is X-Service-Event-Id) and
 * `request.body` to the envelope `{event, timestamp, data}` (so route schemas see the parsed JSON). A request that
 * fails answers 401 with `{"error": {"code", "message"}}`.
 *
 * It is not encapsulated (like a fastify-plugin plugin): register it inside the plugin that
 * holds the webhook routes, not at the root, or every route of the app gets verified.
 *
 *     app.register(async (hooks) => {
 *       await hooks.register(verifyWebhook, { secret });
 *       hooks.post("/webhooks", async (request) => ...request.webhook...);
 *     });
 */
export const verifyWebhook = Object.assign(
  function verifyWebhookPlugin(fastify: FastifyInstanceLike, options: FastifyVerifyOptions, done: (error?: Error) => void): void {
    const { secret, bodyLimit = DEFAULT_BODY_LIMIT, ...verifyOptions } = options;
    // Replaces the JSON parser of this scope: the signed bytes are needed, not an object.
    fastify.removeContentTypeParser("application/json");
    fastify.addContentTypeParser("application/json", { parseAs: "buffer", bodyLimit }, (_request, body, parsed) => parsed(null, body));
    if (!fastify.hasRequestDecorator("webhook")) fastify.decorateRequest("webhook", null);
    fastify.addHook("preValidation", async (request, reply) => {
      try {
        // No body at all (a GET, an empty POST) is checked as zero bytes and refused with a code.
        const webhook = verifyEvent(secret, request.headers, (request.body ?? new Uint8Array(0)) as Uint8Array, verifyOptions);
        const { id: _id, ...envelope } = webhook;
        request.webhook = webhook;
        request.body = envelope;
      } catch (error) {
        const answer = unauthorizedBody(error);
        if (!answer) throw error;
        return reply.code(401).send(answer);
      }
    });
    done();
  },
  // What fastify-plugin sets: the plugin applies to the scope that registers it.
  { [Symbol.for("skip-override")]: true, [Symbol.for("fastify.display-name")]: "@mailhooks/verify" },
);
