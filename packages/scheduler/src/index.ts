/**
 * The fair scheduler (docs/scheduler.md): the one decision of which
 * waiting work may start now. @mailhooks/delivery-state's claim reads the state it needs and
 * carries out what it decides; nothing else admits work.
 */
export * from "./decide.js";
