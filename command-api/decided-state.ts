import type { Decider, DomainEvent } from '../domain/decider.ts';

/**
 * For routes that answer with the aggregate as it is after the command (a PATCH answering the whole
 * record): wraps a decider so the state the command was decided on (on the last attempt, when a
 * concurrent write made it retry) can be folded with the new events into the answer.
 */
export function withDecidedState<Command, Event extends DomainEvent, State>(decider: Decider<Command, Event, State>) {
  let decidedOn: { state: State } | null = null;
  return {
    decider: {
      ...decider,
      decide(command: Command, state: State): Event[] {
        decidedOn = { state };
        return decider.decide(command, state);
      },
    } satisfies Decider<Command, Event, State>,
    after(events: DomainEvent[]): State {
      if (!decidedOn) throw new Error('The command has not been decided yet');
      return (events as Event[]).reduce(decider.evolve, decidedOn.state);
    },
  };
}
