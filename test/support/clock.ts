import type { Clock } from '../../infra/clock.ts';

/** A clock the test moves: every command, decision and job of the service reads this time. */
export class ManualClock implements Clock {
  private time: number;

  constructor(start: string) {
    this.time = Date.parse(start);
  }

  now(): Date {
    return new Date(this.time);
  }

  set(at: string): void {
    this.time = Date.parse(at);
  }

  advance(ms: number): void {
    this.time += ms;
  }
}
