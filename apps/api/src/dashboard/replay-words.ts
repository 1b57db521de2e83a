/**
 * Replay refusals in the dashboard's words. The replay service answers in the API's words, which
 * name request fields (`webhook_id`, `target_url`); on a page the same refusal names the form's
 * fields. Anything not listed here is already in words and shown as it is.
 */
const IN_WORDS: [RegExp, string][] = [
  [/several destinations/, "This event went to several endpoints: under Webhook, choose the one whose secret signs the replay to the override URL."],
  [/webhooks are disabled/, "Every endpoint that received this event is disabled: enable one under Webhooks, or replay to an override URL."],
  [/is not a destination of this event/, "The chosen webhook did not receive this event: choose one of the endpoints it went to."],
];

export function replayRefusalInWords(message: string): string {
  return IN_WORDS.find(([pattern]) => pattern.test(message))?.[1] ?? message;
}
