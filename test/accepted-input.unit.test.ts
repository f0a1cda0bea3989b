import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { jsonProblems, MAX_JSON_DEPTH, mayHoldProblems, pathProblems, textProblem } from '../infra/http/accepted-input.ts';

describe('the text the service accepts', () => {
  it('is well-formed Unicode without NUL: other control characters and surrogate pairs are text', () => {
    expect(textProblem('plain, \u0001 and \t and 🍵 and \ud83c\udf75')).toBeNull();
    expect(textProblem('a\u0000b')).toMatch(/NUL/);
    for (const unpaired of ['\ud800', 'x\udc00', '\ud800\ud800', '\udc00\ud800', 'end\ud83c']) expect(textProblem(unpaired)).toMatch(/unpaired surrogate/);
  });

  it('names each bad value by its path and a bad key by the object holding it, in document order', () => {
    const body = { name: 'fine', payload: { lines: [{ note: 'a\u0000' }, 'b\ud800'], ['k\u0000']: 1 } };
    expect(jsonProblems(body, 'body').map((issue) => issue.path)).toEqual([
      ['body', 'payload'],
      ['body', 'payload', 'lines', 0, 'note'],
      ['body', 'payload', 'lines', 1],
    ]);
    expect(jsonProblems({ limit: '1\u0000' }, 'query')).toEqual([{ message: 'query.limit: must not contain NUL (U+0000)', path: ['query', 'limit'] }]);
  });

  it(`accepts ${MAX_JSON_DEPTH} levels of nesting and refuses one more, however deep the rest goes`, () => {
    const nestedArrays = (levels: number) => JSON.parse(`${'['.repeat(levels)}${']'.repeat(levels)}`);
    expect(jsonProblems(nestedArrays(MAX_JSON_DEPTH), 'body')).toEqual([]);
    expect(jsonProblems(nestedArrays(MAX_JSON_DEPTH + 1), 'body')).toEqual([{ message: `body: nested deeper than ${MAX_JSON_DEPTH} levels`, path: ['body'] }]);
    expect(jsonProblems(nestedArrays(200_000), 'body')).toHaveLength(1);
  });

  it('lists at most 20 problems', () => {
    expect(
      jsonProblems(
        Array.from({ length: 1000 }, () => '\u0000'),
        'body',
      ),
    ).toHaveLength(20);
  });

  it('a path must be percent-encoded UTF-8 without NUL', () => {
    expect(pathProblems('/api/v2/admin/users/caf%C3%A9%20%F0%9F%8D%B5')).toEqual([]);
    for (const bad of ['/x/%ZZ', '/x/%ff%fe', '/x/%ED%A0%80', '/x/%E0%A4%A', '/x/a%00'])
      expect(pathProblems(bad).map((issue) => issue.path)).toEqual([['path']]);
  });

  it('skips the walk only for a raw body that can hold no problem: no \\u escape, and too few brackets to nest too deep', () => {
    const raw = (text: string) => Buffer.from(text);
    expect(mayHoldProblems(raw('{"eventName":"purchase","payload":{"amount":12.5,"tags":["a","b"]}}'))).toBe(false);
    expect(mayHoldProblems(raw('{"name":"a\\u0000"}'))).toBe(true);
    expect(mayHoldProblems(raw('{"name":"\\ud800"}'))).toBe(true);
    expect(mayHoldProblems(raw('{"name":"\\u00e9"}'))).toBe(true);
    expect(mayHoldProblems(raw(`${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}`))).toBe(false);
    expect(mayHoldProblems(raw(`${'['.repeat(MAX_JSON_DEPTH + 1)}${']'.repeat(MAX_JSON_DEPTH + 1)}`))).toBe(true);
    expect(mayHoldProblems(raw(`{"padding":"${'x'.repeat(5000)}"}`))).toBe(true);
  });

  it('never skips a body the walk would refuse (any JSON value, its text as JSON.stringify writes it)', () => {
    const text = fc.string({
      unit: fc.oneof(
        fc.constantFrom('\u0000', '\ud800', '\udc00', '\ud83c\udf75', 'a', 'é', '[', '{'),
        fc.nat({ max: 0xffff }).map((unit) => String.fromCharCode(unit)),
      ),
    });
    const value = fc.letrec((tie) => ({
      tree: fc.oneof({ depthSize: 'small' }, tie('leaf'), tie('array'), tie('object')),
      leaf: fc.oneof(text, fc.double(), fc.boolean(), fc.constant(null)),
      array: fc.array(tie('tree'), { maxLength: 4 }),
      object: fc.dictionary(text, tie('tree'), { maxKeys: 4 }),
    })).tree;
    const deep = fc.integer({ min: 1, max: 40 }).map((levels) => JSON.parse(`${'['.repeat(levels)}${']'.repeat(levels)}`) as unknown);
    let skipped = 0;
    fc.assert(
      fc.property(fc.oneof(value, deep), (body) => {
        if (mayHoldProblems(Buffer.from(JSON.stringify(body)))) return;
        skipped++;
        expect(jsonProblems(body, 'body')).toEqual([]);
      }),
      { numRuns: 2000, seed: 20261206 },
    );
    // The property says something only about the bodies it skips: enough of them were.
    expect(skipped).toBeGreaterThan(200);
  });
});
