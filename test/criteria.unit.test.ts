import { describe, expect, it } from 'vitest';
import type { Criterion } from '../domain/challenge.ts';
import { meetsCriteria, meetsCriterion, payloadValue } from '../domain/criteria.ts';

const payload = {
  order: { total: 42.5, currency: 'EUR', paid: true, coupon: null, items: [{ sku: 'MUG-1', qty: 2 }, { sku: 'TEE-9' }] },
  quantity: '5',
  note: 'gift for a friend',
  tags: ['summer', 7, true],
  empty: '',
};
const meets = (field: string, operator: Criterion['operator'], value?: Criterion['value']) => meetsCriterion({ field, operator, value }, payload);

describe('payloadValue', () => {
  it('follows dot paths, with numeric segments indexing arrays', () => {
    expect(payloadValue(payload, 'order.total')).toBe(42.5);
    expect(payloadValue(payload, 'order.items.1.sku')).toBe('TEE-9');
    expect(payloadValue(payload, 'tags.0')).toBe('summer');
    expect(payloadValue(payload, 'order.coupon')).toBeNull();
  });

  it('is undefined for anything missing', () => {
    expect(payloadValue(payload, 'order.shipping')).toBeUndefined();
    expect(payloadValue(payload, 'order.items.5.sku')).toBeUndefined();
    expect(payloadValue(payload, 'order.items.first')).toBeUndefined();
    expect(payloadValue(payload, 'order.total.value')).toBeUndefined();
    expect(payloadValue(payload, 'order.coupon.code')).toBeUndefined();
  });

  it('does not reach inherited properties', () => {
    expect(payloadValue(payload, 'constructor')).toBeUndefined();
    expect(payloadValue(payload, 'order.toString')).toBeUndefined();
  });
});

describe('meetsCriterion', () => {
  it('eq: equal scalars, a number equal to a numeric string', () => {
    expect(meets('order.currency', 'eq', 'EUR')).toBe(true);
    expect(meets('order.currency', 'eq', 'eur')).toBe(false);
    expect(meets('order.total', 'eq', 42.5)).toBe(true);
    expect(meets('order.total', 'eq', '42.50')).toBe(true);
    expect(meets('quantity', 'eq', 5)).toBe(true);
    expect(meets('quantity', 'eq', '5.0')).toBe(false);
    expect(meets('order.items.0.qty', 'eq', 2)).toBe(true);
  });

  it('eq: a boolean only equals a boolean', () => {
    expect(meets('order.paid', 'eq', true)).toBe(true);
    expect(meets('order.paid', 'eq', 'true')).toBe(false);
    expect(meets('order.paid', 'eq', 1)).toBe(false);
    expect(meets('empty', 'eq', false)).toBe(false);
  });

  it('neq: a present field unequal to the value', () => {
    expect(meets('order.currency', 'neq', 'USD')).toBe(true);
    expect(meets('order.currency', 'neq', 'EUR')).toBe(false);
    expect(meets('quantity', 'neq', 5)).toBe(false);
    expect(meets('order.paid', 'neq', false)).toBe(true);
  });

  it('gt, gte, lt, lte compare numbers and numeric strings', () => {
    expect(meets('order.total', 'gt', 42)).toBe(true);
    expect(meets('order.total', 'gt', 42.5)).toBe(false);
    expect(meets('order.total', 'gte', 42.5)).toBe(true);
    expect(meets('order.total', 'lt', 42.5)).toBe(false);
    expect(meets('order.total', 'lte', 42.5)).toBe(true);
    expect(meets('order.total', 'lt', 100)).toBe(true);
    expect(meets('quantity', 'gt', 4)).toBe(true);
    expect(meets('quantity', 'lte', 4)).toBe(false);
  });

  it('gt, gte, lt, lte fail on anything but a number or a numeric string', () => {
    expect(meets('order.currency', 'gt', 0)).toBe(false);
    expect(meets('order.currency', 'lt', 0)).toBe(false);
    expect(meets('order.paid', 'gte', 0)).toBe(false);
    expect(meets('empty', 'lte', 0)).toBe(false);
    expect(meets('tags', 'gt', 0)).toBe(false);
  });

  it('in: the field eq any listed value', () => {
    expect(meets('order.currency', 'in', ['USD', 'EUR'])).toBe(true);
    expect(meets('order.currency', 'in', ['USD', 'GBP'])).toBe(false);
    expect(meets('quantity', 'in', [1, 5])).toBe(true);
    expect(meets('order.paid', 'in', ['true', 1])).toBe(false);
  });

  it('contains: a substring of a string field', () => {
    expect(meets('note', 'contains', 'gift')).toBe(true);
    expect(meets('note', 'contains', 'Gift')).toBe(false);
    expect(meets('order.items.0.sku', 'contains', 1)).toBe(true);
  });

  it('contains: an element of an array field', () => {
    expect(meets('tags', 'contains', 'summer')).toBe(true);
    expect(meets('tags', 'contains', 'sum')).toBe(false);
    expect(meets('tags', 'contains', '7')).toBe(true);
    expect(meets('tags', 'contains', true)).toBe(true);
    expect(meets('order.total', 'contains', 42)).toBe(false);
  });

  it('exists: present and not null, unless the value is false', () => {
    expect(meets('order.total', 'exists')).toBe(true);
    expect(meets('order.total', 'exists', true)).toBe(true);
    expect(meets('empty', 'exists')).toBe(true);
    expect(meets('order.coupon', 'exists')).toBe(false);
    expect(meets('order.shipping', 'exists', true)).toBe(false);
    expect(meets('order.shipping', 'exists', false)).toBe(true);
    expect(meets('order.coupon', 'exists', false)).toBe(true);
    expect(meets('order.total', 'exists', false)).toBe(false);
  });

  it.each(['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'contains'] as const)('%s fails on a missing or null field', (operator) => {
    expect(meets('order.shipping', operator, 0)).toBe(false);
    expect(meets('order.coupon', operator, 0)).toBe(false);
  });

  it('in fails on a missing or null field', () => {
    expect(meets('order.shipping', 'in', [0, ''])).toBe(false);
    expect(meets('order.coupon', 'in', [0, ''])).toBe(false);
  });
});

describe('meetsCriteria', () => {
  it('needs every criterion to hold; no criteria are met', () => {
    const bigEuroOrder: Criterion[] = [
      { field: 'order.currency', operator: 'eq', value: 'EUR' },
      { field: 'order.total', operator: 'gte', value: 40 },
    ];
    expect(meetsCriteria(bigEuroOrder, payload)).toBe(true);
    expect(meetsCriteria([...bigEuroOrder, { field: 'order.coupon', operator: 'exists' }], payload)).toBe(false);
    expect(meetsCriteria([], {})).toBe(true);
  });
});
