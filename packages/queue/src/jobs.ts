import type { JobsOptions } from "bullmq";
import { z } from "zod";
import { DELIVERY_BACKOFF_TYPE, JOB_NAMES } from "./names.js";

/**
 * The job registry (CONTRIBUTING.md, Habits 2): one definition per job of the deliveries queue,
 * each the job's name, the zod schema of its data, the field of that data naming its unit of work
 * (a destination, a replay, a test delivery: its id is also the job's id) and the BullMQ options
 * its data asks for (the attempt budget from the retry schedule). Job data carries ids only,
 * never secrets or payloads: those are read from PostgreSQL by the dispatcher. Jobs are written
 * to the outbox by @mailhooks/delivery-state (with `workJobData`) and added by the dispatchers'
 * relay (DeliveryQueue.toBulkJob), which parses them with these schemas; the worker parses them
 * again and hands them to its handler of the same name (`WorkJobHandlers`, apps/dispatcher). A
 * new kind of job is one definition here, one handler there, and what it writes in
 * delivery-state: TypeScript names every place a kind is missing from.
 *
 * The maintenance jobs (retention, sweep) carry no data and no work: only the dispatchers' job
 * schedulers produce them (apps/dispatcher/src/maintenance.ts).
 */

/**
 * How many attempts BullMQ may give a job whose work starts at attempt `firstAttempt` (0 is the
 * initial attempt): `attemptBudget` of @mailhooks/delivery-state's retry policy, over the
 * deployment's retry schedule. The producer is handed it (this package cannot import that one).
 */
export type AttemptBudget = (firstAttempt: number) => number;

/** The BullMQ options a job's data asks for, beside its id and priority. */
export type WorkJobOptions = Pick<JobsOptions, "attempts" | "backoff" | "delay">;

/** One kind of job of the deliveries queue; see the registry above. */
export interface WorkJobDefinition<Name extends string = string, Data extends object = object> {
  /** Its name, stored in Redis and in the outbox (JOB_NAMES: never rename one). */
  readonly name: Name;
  /** Its data: checked by the relay before the job is added, and by the worker before it acts. */
  readonly schema: z.ZodType<Data>;
  /** The field of its data holding the id of its unit of work, which is also the job's id. */
  readonly workIdField: keyof Data & string;
  /**
   * Its attempt budget, retry backoff and delay, from its data, the retry schedule's budget and
   * the time it is added (epoch ms).
   */
  readonly options: (data: Data, budget: AttemptBudget, now: number) => WorkJobOptions;
}

/** A definition, its data's type inferred from its schema. */
function defineWorkJob<const Name extends string, Data extends object>(
  definition: WorkJobDefinition<Name, Data>,
): WorkJobDefinition<Name, Data> {
  return definition;
}

const id = z.string().min(1).max(100);

/**
 * Who the work is for: the fair scheduler (packages/scheduler) shares the dispatchers among
 * webhooks and accounts by these ids and applies the webhook's rate_limit. Jobs relayed before
 * outbox rows named their owner have none and are admitted at once.
 */
const owner = { webhookId: id.optional(), accountId: id.optional() };

/** One attempt, no retry: test deliveries and replays. */
const oneAttempt = (): WorkJobOptions => ({ attempts: 1 });

/**
 * Delivers one destination (event x webhook): the initial attempt and its retries, on the retry
 * schedule (the dispatcher's backoff strategy of type DELIVERY_BACKOFF_TYPE). A job queued again
 * by the sweeper after its first job was lost starts at `firstAttempt` (the attempts already
 * recorded), so that the schedule and the log go on where they stopped.
 */
export const deliveryJob = defineWorkJob({
  name: JOB_NAMES.delivery,
  schema: z.object({
    destinationId: id,
    ...owner,
    firstAttempt: z.number().int().min(0).max(10).optional(),
    /** Epoch ms before which the (re-queued) attempt is not due: its retry delay is kept. */
    notBefore: z.number().int().nonnegative().optional(),
  }),
  workIdField: "destinationId",
  options: (data, budget, now) => ({
    attempts: budget(data.firstAttempt ?? 0),
    backoff: { type: DELIVERY_BACKOFF_TYPE },
    ...(data.notBefore && data.notBefore > now ? { delay: data.notBefore - now } : {}),
  }),
});

/** A test event (at webhook creation, or asked for again): one attempt, no retry. */
export const testDeliveryJob = defineWorkJob({
  name: JOB_NAMES.testDelivery,
  schema: z.object({ testDeliveryId: id, ...owner }),
  workIdField: "testDeliveryId",
  options: oneAttempt,
});

/** One replay of a stored event (docs/api.md, "Replay"): one attempt, no retry. */
export const replayJob = defineWorkJob({
  name: JOB_NAMES.replay,
  schema: z.object({ replayId: id, ...owner }),
  workIdField: "replayId",
  options: oneAttempt,
});

export type DeliveryJobData = z.infer<typeof deliveryJob.schema>;
export type TestDeliveryJobData = z.infer<typeof testDeliveryJob.schema>;
export type ReplayJobData = z.infer<typeof replayJob.schema>;

const definitions = {
  [deliveryJob.name]: deliveryJob,
  [replayJob.name]: replayJob,
  [testDeliveryJob.name]: testDeliveryJob,
};

/** The names of the jobs that carry a unit of work; @mailhooks/delivery-state calls them its kinds of work. */
export type WorkJobName = keyof typeof definitions;

/** The data of job `Name`, as its schema returns it. */
export type WorkJobData<Name extends WorkJobName = WorkJobName> = { [N in WorkJobName]: z.infer<(typeof definitions)[N]["schema"]> }[Name];

/** The registry: each job's definition under its name. */
export const WORK_JOBS: { readonly [N in WorkJobName]: WorkJobDefinition<N, WorkJobData<N>> } = definitions;

/** Every job name of the registry, in a fixed order (destinations first). */
export const WORK_JOB_NAMES = Object.keys(WORK_JOBS) as WorkJobName[];

/** Whether `name` is a job of the registry (a job's name as Redis or the outbox holds it). */
export function isWorkJobName(name: string): name is WorkJobName {
  return Object.hasOwn(WORK_JOBS, name);
}

/** The data of a job of `name` for the work `workId`, as it is first queued. */
export function workJobData(name: WorkJobName, workId: string): Record<string, string> {
  return { [WORK_JOBS[name].workIdField]: workId };
}

/**
 * The id of the work a job of `name` is about, read from its data without checking the rest
 * (a job whose data its schema refuses still names its work, which must then end); null when it
 * names none.
 */
export function workIdOf(name: WorkJobName, data: unknown): string | null {
  const value = (data ?? {}) as Record<string, unknown>;
  const workId = value[WORK_JOBS[name].workIdField];
  return typeof workId === "string" ? workId : null;
}

/**
 * `data` as the schema of job `name` returns it, with the BullMQ options it asks for (see
 * WorkJobDefinition.options).
 * @throws ZodError for data the job's schema refuses
 */
export function prepareWorkJob<N extends WorkJobName>(
  name: N,
  data: unknown,
  budget: AttemptBudget,
  now: number,
): { data: WorkJobData<N>; options: WorkJobOptions } {
  const definition: WorkJobDefinition<N, WorkJobData<N>> = WORK_JOBS[name];
  const parsed = definition.schema.parse(data);
  return { data: parsed, options: definition.options(parsed, budget, now) };
}

/** What a handler learns of the job's run beside its data. */
export interface WorkJobRun {
  /** The attempts BullMQ recorded for the job before this one (a retry's: 1 or more). */
  attemptsMade: number;
}

/**
 * The worker's handlers, one per job of the registry (the dispatcher provides them: TypeScript
 * refuses a map that misses one), each given the job's data as its schema parsed it.
 */
/**
 * What a handler tells the worker when its work has ended: `leaseReleased` when the statement
 * that ended the work also ended its webhook's scheduler lease (nothing is left to release).
 */
export type WorkJobResult = { leaseReleased: true } | undefined;

export type WorkJobHandlers = { readonly [N in WorkJobName]: (data: WorkJobData<N>, run: WorkJobRun) => Promise<WorkJobResult | void> };

/**
 * Parses `data` with the schema of job `name` and calls that job's handler.
 * @throws ZodError for data the job's schema refuses (the handler is not called)
 */
export function runWorkJob<N extends WorkJobName>(
  handlers: WorkJobHandlers,
  name: N,
  data: unknown,
  run: WorkJobRun,
): Promise<WorkJobResult | void> {
  const definition: WorkJobDefinition<N, WorkJobData<N>> = WORK_JOBS[name];
  const handler: (data: WorkJobData<N>, run: WorkJobRun) => Promise<WorkJobResult | void> = handlers[name];
  return handler(definition.schema.parse(data), run);
}

/**
 * The number of the attempt a delivery job makes (0: the initial one, n: retry n, the numbers
 * of the deliveries log) once BullMQ has recorded `attemptsMade` attempts of it: a job queued
 * again by the sweeper starts at its `firstAttempt`.
 */
export function deliveryAttemptNumber(data: Pick<DeliveryJobData, "firstAttempt">, attemptsMade: number): number {
  return (data.firstAttempt ?? 0) + attemptsMade;
}
