/**
 * The retry schedule (spec "Limits"; CONTRACT.md section 6): after a failed attempt number
 * `attemptsMade` (1 = the initial attempt failed), wait `retryDelaysMs[attemptsMade - 1]` ms,
 * counted from the failed attempt's end. Returns -1 once the schedule is exhausted, which tells
 * BullMQ to stop. The dispatcher schedules retries with it; the dashboard shows the next one's
 * time with it.
 */
export function retryDelayFor(retryDelaysMs: readonly number[], attemptsMade: number): number {
  return retryDelaysMs[attemptsMade - 1] ?? -1;
}
