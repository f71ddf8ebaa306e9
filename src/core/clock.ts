/**
 * Clock returns the current time in milliseconds since the Unix epoch.
 *
 * It is wall-clock time, not a monotonic counter, because reservation
 * expiries are persisted and must mean the same thing after a restart.
 * The core never reads time any other way, so tests advance a fake clock
 * instead of sleeping.
 */
export type Clock = () => number;

/** systemClock is the Clock of a real server. */
export const systemClock: Clock = () => Date.now();
