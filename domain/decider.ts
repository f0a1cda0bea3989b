/**
 * A decider per aggregate (the Emmett style): `decide` turns a command and the current state into new
 * events, `evolve` folds one event into the state. Both are pure; the command side does the I/O.
 */
export interface Decider<Command, Event, State> {
  initialState: State;
  decide(command: Command, state: State): Event[];
  /** `this: void`: deciders are passed around unbound (`events.reduce(decider.evolve, …)`). */
  evolve(this: void, state: State, event: Event): State;
}

/** A domain event as the domain sees it; the command side adds metadata when it appends. */
export interface DomainEvent<Type extends string = string, Data = unknown> {
  type: Type;
  data: Data;
}

/** A rule of the domain refused the command. `kind` says which HTTP answer fits; `path` names the offending input field. */
export class DomainError extends Error {
  constructor(
    readonly kind: 'conflict' | 'invalid' | 'not_found',
    message: string,
    readonly path?: (string | number)[],
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

export function fold<Event, State>(decider: Pick<Decider<unknown, Event, State>, 'initialState' | 'evolve'>, events: Event[]): State {
  return events.reduce(decider.evolve, decider.initialState);
}
