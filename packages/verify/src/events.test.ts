import { EVENT_TYPES } from "@mailhooks/events";
import { EMAIL_EVENT_TYPES } from "./events.js";

/**
 * @mailhooks/verify declares the six email event kinds itself, so that it keeps no dependency;
 * they must stay the service's (packages/events), in the same order.
 */
test("the kinds verify declares are the service's", () => {
  expect([...EMAIL_EVENT_TYPES]).toEqual([...EVENT_TYPES]);
});
