import { expect } from 'vitest';
import { DomainError, fold, type Decider, type DomainEvent } from '../../domain/decider.ts';

/** Given these past events, when this command, then these new events (or this refusal). No database. */
export function given<Command, Event extends DomainEvent, State>(decider: Decider<Command, Event, State>, history: Event[]) {
  return {
    when(command: Command) {
      const decide = () => decider.decide(command, fold(decider, history));
      return {
        then(expected: Event[]) {
          expect(decide()).toEqual(expected);
        },
        thenRefuses(kind: DomainError['kind'], message: RegExp) {
          let refusal: unknown;
          try {
            decide();
          } catch (error) {
            refusal = error;
          }
          expect(refusal).toBeInstanceOf(DomainError);
          expect((refusal as DomainError).kind).toBe(kind);
          expect((refusal as DomainError).message).toMatch(message);
        },
      };
    },
  };
}
