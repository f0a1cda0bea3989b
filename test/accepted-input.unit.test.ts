import { describe, expect, it } from 'vitest';
import { jsonProblems, MAX_JSON_DEPTH, pathProblems, textProblem } from '../infra/http/accepted-input.ts';

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
});
