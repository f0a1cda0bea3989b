import type { Request } from 'express';

/**
 * Where the service reads the time. Everything that stamps an event, decides on a date or finds due work
 * asks the clock, so tests move time instead of sleeping.
 */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** The clock of the app serving this request (set by the composed app). */
export function clockOf(req: Request): Clock {
  return (req.app.locals.clock as Clock | undefined) ?? systemClock;
}
