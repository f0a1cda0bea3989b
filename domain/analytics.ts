/**
 * The analytics figures (DESIGN §6), pure: rates are fractions in [0, 1] rounded to 4 decimals, and 0 when
 * there is nothing to divide by.
 */

/** `value` rounded to 4 decimals. */
export function round4(value: number): number {
  return Math.round(value * 10_000) / 10_000;
}

/** numerator / denominator as a fraction in [0, 1], rounded to 4 decimals; 0 when the denominator is 0. */
export function fraction(numerator: number, denominator: number): number {
  if (denominator <= 0) return 0;
  return round4(Math.min(1, Math.max(0, numerator / denominator)));
}

/** numerator / denominator rounded to 4 decimals (an average, not bounded by 1); 0 when the denominator is 0. */
export function ratio(numerator: number, denominator: number): number {
  return denominator <= 0 ? 0 : round4(numerator / denominator);
}

/** What happened at one step of a challenge, counted from the engine's `ActionAttempted` facts. */
export interface StepCounts {
  attempts: number;
  criteriaMet: number;
  criteriaNotMet: number;
  /** Attempts with outcome `completed` (repeats in later runs included). */
  completions: number;
  usersAttempted: number;
  usersCompleted: number;
}

/** `ChallengeStarted` facts: runs started (repeats included) and the users who started one. */
export interface StartCounts {
  starts: number;
  usersStarted: number;
}

export const NO_STEP_COUNTS: StepCounts = { attempts: 0, criteriaMet: 0, criteriaNotMet: 0, completions: 0, usersAttempted: 0, usersCompleted: 0 };

/**
 * The two rates of each step, steps in order:
 * - completionRate(i) = users who completed step i / users who started the challenge;
 * - dropOffRate(i) = 1 - completions(i) / completions(i - 1), with the challenge's starts in place of
 *   completions(-1); clamped to [0, 1] (a later step of a non-linear challenge can be done more often).
 */
export function stepRates(steps: readonly StepCounts[], started: StartCounts): { completionRate: number; dropOffRate: number }[] {
  return steps.map((step, index) => {
    const before = index === 0 ? started.starts : steps[index - 1]!.completions;
    return {
      completionRate: fraction(step.usersCompleted, started.usersStarted),
      dropOffRate: before <= 0 ? 0 : fraction(before - step.completions, before),
    };
  });
}
