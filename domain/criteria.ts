/**
 * Whether a custom event's payload meets an action's criteria. Every criterion must hold; no criteria: met.
 *
 * - A missing (undefined) or null field fails every operator except `exists` with value false.
 * - `eq` / `neq`: equal scalars. A number and a numeric string compare as numbers (5 eq "5"); two strings
 *   compare as strings; a boolean only equals a boolean. An object or array field equals no value.
 * - `gt` / `gte` / `lt` / `lte`: the field must be a finite number or a numeric string, compared numerically;
 *   anything else fails.
 * - `in`: the field eq any of the listed values.
 * - `contains`: a string field contains the value (converted with String()) as a substring, or an array field
 *   has an element eq the value.
 * - `exists`: value undefined or true: the field is present and not null; false: it is absent or null.
 *
 * A numeric string is decimal notation, optionally signed, with an exponent and surrounding spaces ("1e3", " 5 ").
 */
import type { Criterion, Scalar } from './challenge.ts';

/** The value at a dot path (`order.items.0.sku`: numeric segments index arrays); undefined when missing. */
export function payloadValue(payload: Record<string, unknown>, path: string): unknown {
  let current: unknown = payload;
  for (const segment of path.split('.')) {
    if (Array.isArray(current)) {
      current = /^\d+$/.test(segment) ? current[Number(segment)] : undefined;
    } else if (current !== null && typeof current === 'object') {
      // Own keys only: a path such as `constructor` must not reach the prototype.
      current = Object.hasOwn(current, segment) ? (current as Record<string, unknown>)[segment] : undefined;
    } else {
      return undefined;
    }
  }
  return current;
}

const NUMERIC_STRING = /^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$/;

function numeric(value: unknown): number | null {
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value === 'string' && NUMERIC_STRING.test(value)) return Number(value);
  return null;
}

function equals(field: unknown, value: Scalar): boolean {
  if (typeof field === 'boolean' || typeof value === 'boolean') return field === value;
  if (typeof field === 'string' && typeof value === 'string') return field === value;
  const a = numeric(field);
  return a !== null && a === numeric(value);
}

function compares(field: unknown, value: Criterion['value'], holds: (a: number, b: number) => boolean): boolean {
  const a = numeric(field);
  const b = numeric(value);
  return a !== null && b !== null && holds(a, b);
}

function isScalar(value: Criterion['value']): value is Scalar {
  return value !== undefined && !Array.isArray(value);
}

export function meetsCriterion(criterion: Criterion, payload: Record<string, unknown>): boolean {
  const { operator, value } = criterion;
  const field = payloadValue(payload, criterion.field);
  const present = field !== undefined && field !== null;
  if (operator === 'exists') return value === false ? !present : present;
  if (!present) return false;
  switch (operator) {
    case 'eq':
      return isScalar(value) && equals(field, value);
    case 'neq':
      return isScalar(value) && !equals(field, value);
    case 'gt':
      return compares(field, value, (a, b) => a > b);
    case 'gte':
      return compares(field, value, (a, b) => a >= b);
    case 'lt':
      return compares(field, value, (a, b) => a < b);
    case 'lte':
      return compares(field, value, (a, b) => a <= b);
    case 'in':
      return Array.isArray(value) && value.some((candidate) => equals(field, candidate));
    case 'contains':
      if (!isScalar(value)) return false;
      if (typeof field === 'string') return field.includes(String(value));
      return Array.isArray(field) && field.some((element) => equals(element, value));
  }
}

export function meetsCriteria(criteria: Criterion[], payload: Record<string, unknown>): boolean {
  return criteria.every((criterion) => meetsCriterion(criterion, payload));
}
