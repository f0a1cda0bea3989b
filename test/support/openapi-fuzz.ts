import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';

/**
 * fast-check arbitraries for requests, generated from the service's own OpenAPI 3.1 documents: every
 * operation, its path and query parameters, its documented headers and its request body schema. A new route
 * is fuzzed as soon as it is declared. (No kept library turns JSON Schema 2020-12 with `$ref`s into
 * fast-check arbitraries, hence this walker; it covers the keywords zod's `toJSONSchema` writes.)
 *
 * Each request is either shaped as the document says (so that it reaches the handlers and their decisions)
 * or broken on purpose: a value of the wrong type, an unknown or missing field, a number out of range, NUL
 * and unpaired surrogates, huge strings, deep nesting, a body that is not JSON, a wrong content type or
 * content encoding, bad or missing credentials.
 */

export type JsonSchema = { [keyword: string]: any };
type OpenApiDocument = { paths: Record<string, Record<string, any>>; components: { schemas: Record<string, JsonSchema> } };

export interface Operation {
  family: string;
  method: string;
  /** The document's path template, e.g. `/leaderboards/{leaderboardConfigId}`. */
  path: string;
  pathParameters: string[];
  query: { name: string; schema: JsonSchema }[];
  headers: string[];
  body: JsonSchema | undefined;
  statuses: Set<number>;
}

export function operationsOf(family: string, document: OpenApiDocument): Operation[] {
  const operations: Operation[] = [];
  for (const [path, methods] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(methods)) {
      const parameters = (operation.parameters ?? []) as { name: string; in: string; schema: JsonSchema }[];
      operations.push({
        family,
        method: method.toUpperCase(),
        path,
        pathParameters: parameters.filter((p) => p.in === 'path').map((p) => p.name),
        query: parameters.filter((p) => p.in === 'query').map((p) => ({ name: p.name, schema: p.schema })),
        headers: parameters.filter((p) => p.in === 'header').map((p) => p.name.toLowerCase()),
        body: operation.requestBody?.content?.['application/json']?.schema,
        statuses: new Set(Object.keys(operation.responses).map(Number)),
      });
    }
  }
  return operations;
}

/** What the world offers a generated request: ids that exist, tokens, positions. */
export interface World {
  /** Ids for a path parameter or body field of this name (the fuzzing organisation's), or undefined. */
  idsFor(name: string): string[] | undefined;
  /** Every id of the fuzzing organisation's resources. */
  ownIds: string[];
  /** Ids of another organisation's resources: never to be seen or touched by the fuzzing organisation. */
  otherIds: string[];
  /** Other strings worth trying in a field of this name (external user ids, link tokens, hostnames...). */
  stringsFor(name: string): string[] | undefined;
  /** Event positions the store has handed out (reads with them as `x-min-position` wait at most briefly). */
  positions: string[];
}

// ——— hostile values ————————————————————————————————————————————————————————————————————————————————

/** Marks a number that JSON.stringify cannot write (1e400 parses as Infinity): spliced into the JSON text. */
const RAW = (token: string) => `\u0001RAW:${token}\u0001`;
export function toJsonText(value: unknown): string {
  return JSON.stringify(value).replace(/"\\u0001RAW:([^"\\]+)\\u0001"/g, '$1');
}

const NUL = '\u0000';
const hostileString = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(NUL, `a${NUL}b`, '\ud800', 'x\udfffy', '\udc00\ud800', `${NUL}\ud800`) },
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      '',
      ' ',
      '\t\n',
      '\u202e\u200b\ufeff',
      '💥🇬🇧👩‍👩‍👧',
      '%00',
      '../../etc/passwd',
      "'; drop table es_events; --",
      '$1 \\u0000 ${x} {{x}}',
      '<script>alert(1)</script>',
      'null',
      'NaN',
      '1e400',
      '-0',
      '2026-02-30T25:61:00Z',
      '0001-01-01',
      '9999-12-31T23:59:59.999999999Z',
      '+275760-09-13T00:00:00Z',
      '__proto__',
    ),
  },
  // Past every maxLength (the longest is 10,000), and past the body limit (413).
  { weight: 2, arbitrary: fc.constantFrom(201, 1001, 2049, 10_001, 40_000, 150_000).map((length) => 'x'.repeat(length)) },
  { weight: 3, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
);
const hostileNumber = fc.constantFrom<unknown>(
  -1,
  -0.5,
  0,
  0.5,
  1.5,
  2 ** 31,
  2 ** 32 + 1,
  2 ** 53 + 2,
  2 ** 63,
  1e21,
  1e308,
  -1e308,
  Number.MAX_VALUE,
  Number.MIN_VALUE,
  RAW('1e400'),
  RAW('-1e400'),
  RAW('1e-400'),
  RAW('123456789012345678901234567890'),
);
/** Nested arrays and objects, deeper than the 32 levels the service accepts (or just within them). */
const deeplyNested = fc.tuple(fc.constantFrom(31, 33, 200, 1500), fc.boolean()).map(([depth, arrays]) => {
  let value: unknown = 1;
  for (let level = 0; level < depth; level++) value = arrays ? [value] : { a: value };
  return value;
});
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 5, arbitrary: hostileString },
  { weight: 4, arbitrary: hostileNumber },
  { weight: 2, arbitrary: fc.constantFrom<unknown>(null, true, false, [], {}, [null], { a: {} }, [[[]]]) },
  { weight: 1, arbitrary: deeplyNested },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
);
const unknownKey = fc.oneof(
  fc.constantFrom('pointz', 'extra', 'id', 'organisationId', '__proto__', 'constructor', 'prototype', `k${NUL}`, 'k\ud800', '', 'x'.repeat(300)),
  fc.string({ maxLength: 12 }),
);

// ——— valid-shaped values, from the schemas ————————————————————————————————————————————————————————

const DAY = 86_400_000;
/** Dates the service accepts, most of them near now (so "in the future" and "live" rules are met and missed). */
function dateArbitrary(withTime: boolean): fc.Arbitrary<string> {
  const now = Date.now();
  const instant = fc.oneof(
    { weight: 3, arbitrary: fc.integer({ min: -60, max: 400 }).map((days) => now + days * DAY) },
    {
      weight: 1,
      arbitrary: fc.date({ min: new Date('1900-01-01T00:00:00Z'), max: new Date('2999-12-31T00:00:00Z'), noInvalidDate: true }).map((d) => d.getTime()),
    },
  );
  if (!withTime) return instant.map((ms) => new Date(ms).toISOString().slice(0, 10));
  return fc.tuple(instant, fc.constantFrom('Z', '+05:30', '-08:00', '.123456789Z')).map(([ms, zone]) => {
    const iso = new Date(ms).toISOString();
    return zone === 'Z' ? iso : zone.startsWith('.') ? `${iso.slice(0, 19)}${zone}` : `${iso.slice(0, 19)}${zone}`;
  });
}

const MAX_DEPTH = 10;

export class SchemaArbitraries {
  private readonly cache = new Map<JsonSchema, fc.Arbitrary<unknown>>();

  constructor(
    private readonly components: Record<string, JsonSchema>,
    private readonly world: World,
  ) {}

  private resolve(schema: JsonSchema): JsonSchema {
    if (typeof schema?.$ref !== 'string') return schema;
    const { $ref, ...siblings } = schema;
    const target = this.components[$ref.replace('#/components/schemas/', '')];
    if (!target) throw new Error(`unresolved ${$ref}`);
    return { ...this.resolve(target), ...siblings };
  }

  /** A value the schema allows, shaped to reach the handler (ids that exist, dates near now). */
  valid(schema: JsonSchema, name?: string, depth = 0): fc.Arbitrary<unknown> {
    const resolved = this.resolve(schema);
    if (depth > MAX_DEPTH) return fc.constant(null);
    const key = name === undefined ? resolved : undefined;
    const cached = key && this.cache.get(key);
    if (cached) return cached;
    const arbitrary = this.build(resolved, name, depth);
    if (key) this.cache.set(key, arbitrary);
    return arbitrary;
  }

  private build(schema: JsonSchema, name: string | undefined, depth: number): fc.Arbitrary<unknown> {
    if ('const' in schema) return fc.constant(schema.const);
    if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
    const members = (schema.anyOf ?? schema.oneOf) as JsonSchema[] | undefined;
    if (members) return fc.oneof(...members.map((member) => this.valid(member, name, depth + 1)));
    if (Array.isArray(schema.allOf)) return this.valid(schema.allOf[0], name, depth + 1);
    if (Array.isArray(schema.type)) return fc.oneof(...schema.type.map((type: string) => this.valid({ ...schema, type }, name, depth + 1)));
    switch (schema.type) {
      case 'string':
        return this.string(schema, name);
      case 'integer':
      case 'number':
        return this.number(schema, name);
      case 'boolean':
        return fc.boolean();
      case 'null':
        return fc.constant(null);
      case 'array': {
        const minLength = schema.minItems ?? 0;
        const maxLength = Math.min(schema.maxItems ?? 3, Math.max(minLength, 3));
        return fc.array(this.valid(schema.items ?? {}, singular(name), depth + 1), { minLength, maxLength });
      }
      case 'object':
        return this.object(schema, depth);
      default:
        return fc.jsonValue({ maxDepth: 2 });
    }
  }

  private string(schema: JsonSchema, name: string | undefined): fc.Arbitrary<string> {
    const minLength = schema.minLength ?? 0;
    const maxLength = schema.maxLength ?? 200;
    const fits = (text: string) => text.length >= minLength && text.length <= maxLength;
    const known = [...(name ? (this.world.idsFor(name) ?? []) : []), ...(name ? (this.world.stringsFor(name) ?? []) : [])].filter(fits);
    let shaped: fc.Arbitrary<string>;
    if (schema.format === 'date-time') shaped = dateArbitrary(true);
    else if (schema.format === 'date') shaped = dateArbitrary(false);
    else if (schema.pattern === '^[0-9a-fA-F]{24}$') {
      const ids = [...this.world.ownIds, ...this.world.otherIds];
      shaped = fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...ids) }, { weight: 1, arbitrary: fc.stringMatching(/^[0-9a-f]{24}$/) });
    } else if (schema.format === 'uri') shaped = fc.webUrl().filter(fits);
    else if (schema.pattern) shaped = fc.stringMatching(new RegExp(schema.pattern)).filter(fits);
    else shaped = fc.string({ unit: 'grapheme', minLength, maxLength: Math.min(maxLength, Math.max(minLength, 24)) });
    return known.length > 0 ? fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...known) }, { weight: 1, arbitrary: shaped }) : shaped;
  }

  private number(schema: JsonSchema, name: string | undefined): fc.Arbitrary<number> {
    const integer = schema.type === 'integer';
    const lowest: number = schema.minimum ?? (schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + (integer ? 1 : 0.5) : -1_000_000);
    const highest: number = schema.maximum ?? (schema.exclusiveMaximum !== undefined ? schema.exclusiveMaximum - (integer ? 1 : 0.5) : Number.MAX_SAFE_INTEGER);
    // Organisations' own rate limits: the fuzzing organisation must not shut itself out for the rest of the run.
    if (name === 'apiTokenRequests' || name === 'userTokenRequests') return fc.integer({ min: Math.max(lowest, 100_000), max: highest });
    const small = fc.integer({ min: Math.max(lowest, -1000, -(2 ** 31)), max: Math.min(highest, Math.max(lowest, 0) + 100, 2 ** 31 - 1) });
    const edges = fc.constantFrom(lowest, highest, ...(schema.maximum === undefined && !integer ? [1e308, Number.MAX_VALUE] : []));
    const spread = integer
      ? fc.integer({ min: Math.max(lowest, -(2 ** 31)), max: Math.min(highest, 2 ** 31 - 1) })
      : fc.double({ min: lowest, max: Math.min(highest, 1e12), noNaN: true, noDefaultInfinity: true });
    return fc.oneof({ weight: 6, arbitrary: small }, { weight: 2, arbitrary: spread }, { weight: 1, arbitrary: edges });
  }

  private object(schema: JsonSchema, depth: number): fc.Arbitrary<unknown> {
    const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
    const required = (schema.required ?? []) as string[];
    const open = schema.additionalProperties !== false && Object.keys(properties).length === 0;
    if (open) {
      const keys = this.resolve(schema.propertyNames ?? {});
      const values =
        typeof schema.additionalProperties === 'object' && Object.keys(schema.additionalProperties).length > 0
          ? this.valid(schema.additionalProperties, undefined, depth + 1)
          : fc.jsonValue({ maxDepth: 2 });
      // Keys with a pattern (language tags of localised details) make a map that needs an entry to mean anything.
      const key = keys.pattern ? this.string(keys, undefined) : fc.string({ minLength: 1, maxLength: Math.min(keys.maxLength ?? 20, 16) });
      return fc.dictionary(key, values, { minKeys: schema.minProperties ?? (keys.pattern ? 1 : 0), maxKeys: 3 });
    }
    const model = Object.fromEntries(Object.entries(properties).map(([key, property]) => [key, this.valid(property, key, depth + 1)]));
    return fc.record(model, { requiredKeys: required.filter((key) => key in model) });
  }

  /** A valid-shaped value with one thing broken: a value replaced, a field added or a field removed. */
  broken(schema: JsonSchema): fc.Arbitrary<unknown> {
    const mutation = fc.oneof(
      { weight: 5, arbitrary: fc.record({ kind: fc.constant('replace' as const), at: fc.nat(), value: hostileValue }) },
      { weight: 2, arbitrary: fc.record({ kind: fc.constant('add' as const), at: fc.nat(), key: unknownKey, value: fc.jsonValue({ maxDepth: 1 }) }) },
      { weight: 2, arbitrary: fc.record({ kind: fc.constant('remove' as const), at: fc.nat() }) },
    );
    return fc.tuple(this.valid(schema), fc.array(mutation, { minLength: 1, maxLength: 3 })).map(([value, mutations]) => {
      let result = structuredClone(value);
      for (const change of mutations) result = mutate(result, change);
      return result;
    });
  }
}

function singular(name: string | undefined): string | undefined {
  if (!name) return undefined;
  return name.endsWith('Ids') ? name.slice(0, -1) : name;
}

type Mutation = { kind: 'replace'; at: number; value: unknown } | { kind: 'add'; at: number; key: string; value: unknown } | { kind: 'remove'; at: number };
type Slot = { holder: Record<string, unknown> | unknown[]; key: string | number };

function mutate(root: unknown, change: Mutation): unknown {
  const slots: Slot[] = [];
  const objects: Record<string, unknown>[] = [];
  // Iterative: an earlier mutation may have put a value nested thousands of levels deep.
  const pending = [root];
  while (pending.length > 0) {
    const node = pending.pop();
    if (node === null || typeof node !== 'object') continue;
    if (!Array.isArray(node)) objects.push(node as Record<string, unknown>);
    for (const [key, child] of Object.entries(node)) {
      slots.push({ holder: node as Record<string, unknown>, key: Array.isArray(node) ? Number(key) : key });
      pending.push(child);
    }
  }
  if (change.kind === 'replace') {
    // One slot more than there are: the whole body.
    const index = change.at % (slots.length + 1);
    if (index === slots.length) return change.value;
    const { holder, key } = slots[index]!;
    (holder as Record<string | number, unknown>)[key] = change.value;
    return root;
  }
  if (change.kind === 'add') {
    if (objects.length === 0) return root;
    Object.defineProperty(objects[change.at % objects.length], change.key, { value: change.value, enumerable: true, writable: true, configurable: true });
    return root;
  }
  const removable = slots.filter((slot) => !Array.isArray(slot.holder));
  if (removable.length === 0) return root;
  const { holder, key } = removable[change.at % removable.length]!;
  delete (holder as Record<string, unknown>)[key as string];
  return root;
}

// ——— whole requests ——————————————————————————————————————————————————————————————————————————————

export type Credential = 'valid' | 'bearer' | 'missing' | 'garbage' | 'other-organisation' | 'wrong-family' | 'revoked' | 'huge';
export type UserCredential = 'valid' | 'missing' | 'garbage' | 'other-organisation' | 'not-bearer';
export type HostChoice = 'own' | 'own-uppercase' | 'own-with-port' | 'other-organisation' | 'unknown';

export type BodyFraming =
  | { kind: 'json' }
  | { kind: 'content-type'; contentType: string }
  | { kind: 'encoded'; encoding: 'gzip' | 'deflate' | 'br' }
  | { kind: 'mis-encoded'; encoding: string }
  | { kind: 'raw'; raw: Buffer; encoding?: string };

export interface GeneratedRequest {
  credential: Credential;
  userCredential: UserCredential;
  host: HostChoice;
  /** Raw (already percent-encoded) path segments, by parameter name. */
  pathParameters: Record<string, string>;
  /** The raw query string, without `?`. */
  query: string;
  /** The JSON value of the body, if any, and how it is framed on the wire. */
  body: { value: unknown } | undefined;
  framing: BodyFraming;
  headers: Record<string, string>;
}

const headerSafe = (text: string) => /^[\t\x20-\x7e\x80-\xff]*$/.test(text);

/** Raw bodies that are not JSON, not UTF-8, cut short, compressed wrongly or bombs. */
const GZIP_BOMB = gzipSync(Buffer.alloc(20_000_000));
const rawBodies = fc.constantFrom<{ raw: Buffer; encoding?: string }>(
  { raw: Buffer.from('not json') },
  { raw: Buffer.from('{"a":') },
  { raw: Buffer.from('') },
  { raw: Buffer.from('null') },
  { raw: Buffer.from('[]') },
  { raw: Buffer.from('"text"') },
  { raw: Buffer.from('1e400') },
  { raw: Buffer.from('{"a":1}trailing') },
  { raw: Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x00, 0x22, 0x7d]) },
  { raw: Buffer.from('\ufeff{}') },
  { raw: Buffer.from('['.repeat(20_000) + ']'.repeat(20_000)) },
  { raw: Buffer.from('{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}') },
  { raw: GZIP_BOMB, encoding: 'gzip' },
  { raw: gzipSync(gzipSync(Buffer.from('{}'))), encoding: 'gzip' },
  { raw: Buffer.from([0x1f, 0x8b, 0x08, 0x00, 0x00]), encoding: 'gzip' },
);
const framing: fc.Arbitrary<BodyFraming> = fc.oneof(
  { weight: 24, arbitrary: fc.constant({ kind: 'json' as const }) },
  {
    weight: 2,
    arbitrary: fc
      .constantFrom(
        'text/plain',
        'application/x-www-form-urlencoded',
        'application/json; charset=latin1',
        'application/json; charset=utf-16',
        'application/json; charset=UTF-8',
        'application/merge-patch+json',
        'multipart/form-data; boundary=x',
        'application/xml',
      )
      .map((contentType) => ({ kind: 'content-type' as const, contentType })),
  },
  { weight: 2, arbitrary: fc.constantFrom('gzip' as const, 'deflate' as const, 'br' as const).map((encoding) => ({ kind: 'encoded' as const, encoding })) },
  {
    weight: 2,
    arbitrary: fc
      .constantFrom('gzip', 'deflate', 'br', 'compress', 'identity', 'gzip, br', 'x-unknown', 'GZIP')
      .map((encoding) => ({ kind: 'mis-encoded' as const, encoding })),
  },
  { weight: 2, arbitrary: rawBodies.map(({ raw, encoding }) => ({ kind: 'raw' as const, raw, ...(encoding ? { encoding } : {}) })) },
);

/** Path segments that name nothing, or nothing the service can spell. */
const hostileSegment = fc.constantFrom(
  '%00',
  `abc%00def`,
  '%ZZ',
  '%ff%fe',
  '%ED%A0%80',
  '%F0%9F%92%A5',
  '%',
  'x'.repeat(4000),
  '..',
  '%2e%2e',
  '%2F',
  'A'.repeat(24),
  '0'.repeat(24),
  '%20',
  'null',
  '-1',
  '1e400',
  '%3F%23',
  '%C0%AF',
);
/** Raw query values: NUL, undecodable escapes, huge, out of range, wrong types. */
const hostileQueryValue = fc.constantFrom(
  '%00',
  'a%00b',
  '%ZZ',
  '%ff%fe',
  '%ED%A0%80',
  '%',
  'x'.repeat(6000),
  '',
  '-1',
  '0',
  '101',
  '1e400',
  '9007199254740993',
  '0x10',
  'NaN',
  '9999-12-31',
  '0001-01-01',
  '+275760-09-13',
  '2026-02-30',
  '2026-01-01T25:00:00Z',
  'true',
  '%5B%5D',
);

function encodeQueryValue(value: unknown): string {
  return encodeURIComponent(typeof value === 'string' ? value : (JSON.stringify(value) ?? ''));
}

export function requestArbitrary(operation: Operation, schemas: SchemaArbitraries, world: World): fc.Arbitrary<GeneratedRequest> {
  const pathParameters = fc.record(
    Object.fromEntries(
      operation.pathParameters.map((name) => {
        const own = world.idsFor(name) ?? world.ownIds;
        return [
          name,
          fc.oneof(
            { weight: 12, arbitrary: fc.constantFrom(...own) },
            { weight: 2, arbitrary: fc.constantFrom(...world.otherIds) },
            { weight: 2, arbitrary: fc.stringMatching(/^[0-9a-f]{24}$/) },
            { weight: 3, arbitrary: hostileSegment },
          ),
        ];
      }),
    ),
  );

  const queryPairs = fc.tuple(
    ...operation.query.map(({ name, schema }) =>
      fc.option(
        fc.oneof(
          { weight: 8, arbitrary: schemas.valid(schema, name).map((value) => `${name}=${encodeQueryValue(value)}`) },
          { weight: 2, arbitrary: hostileQueryValue.map((value) => `${name}=${value}`) },
          { weight: 1, arbitrary: fc.tuple(hostileQueryValue, hostileQueryValue).map(([a, b]) => `${name}=${a}&${name}=${b}`) },
        ),
        { freq: 2 },
      ),
    ),
    fc.option(
      fc.oneof(
        fc
          .tuple(
            unknownKey.filter((key) => key.length < 100),
            hostileQueryValue,
          )
          .map(([key, value]) => `${encodeURIComponent(key.replace(/[\ud800-\udfff]/g, ''))}=${value}`),
        fc.constantFrom('limit[$gt]=1', 'skip[]=1', '%00=1', '=', '&&', 'a=1&a=2&a=3'),
      ),
      { freq: 6 },
    ),
  );
  const query = queryPairs.map((pairs) => pairs.filter((pair): pair is string => pair !== null).join('&'));

  const sendsBody = operation.body !== undefined;
  const body: fc.Arbitrary<{ value: unknown } | undefined> = sendsBody
    ? fc.oneof(
        { weight: 5, arbitrary: schemas.valid(operation.body!).map((value) => ({ value })) },
        { weight: 5, arbitrary: schemas.broken(operation.body!).map((value) => ({ value })) },
        { weight: 1, arbitrary: fc.constant(undefined) },
      )
    : fc.oneof({ weight: 6, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: hostileValue.map((value) => ({ value })) });

  const declared = new Set(operation.headers);
  const optionalHeader = (name: string, values: fc.Arbitrary<string>, freq = 3) =>
    fc.option(
      values.filter(headerSafe).map((value) => [name, value] as const),
      { freq },
    );
  const headers = fc
    .tuple(
      declared.has('idempotency-key') || operation.method !== 'GET'
        ? optionalHeader(
            'idempotency-key',
            fc.oneof(
              { weight: 4, arbitrary: fc.uuid() },
              // The same key again (with another body: a 409) across the whole run.
              { weight: 3, arbitrary: fc.constantFrom('fuzz-key-1', 'fuzz-key-2') },
              { weight: 1, arbitrary: fc.constantFrom('', ' ', '%00', 'x'.repeat(5000), 'é'.repeat(300)) },
            ),
            2,
          )
        : fc.constant(null),
      declared.has('x-min-position') || operation.method === 'GET'
        ? optionalHeader(
            'x-min-position',
            fc.oneof(
              { weight: 3, arbitrary: fc.constantFrom(...world.positions) },
              // Positions the store has passed or never wrote in that shape; not positions ahead of it, which
              // rightly wait READ_YOUR_WRITES_TIMEOUT_MS and answer 503.
              { weight: 2, arbitrary: fc.constantFrom('0'.repeat(32), 'not-a-position', '', '0', 'g'.repeat(32), '1'.repeat(33), '%00') },
            ),
            4,
          )
        : fc.constant(null),
      declared.has('x-language')
        ? optionalHeader(
            'x-language',
            fc.oneof(fc.constantFrom('en', 'fr', 'en-GB', 'fr-CA, en;q=0.5', '*', '', 'x'.repeat(600), 'zz-ZZ-x-private'), fc.string({ maxLength: 20 })),
          )
        : fc.constant(null),
      optionalHeader('x-request-id', fc.oneof(fc.uuid(), fc.constantFrom('x'.repeat(300), 'a b', 'é', '../../'))),
      optionalHeader('x-correlation-id', fc.oneof(fc.uuid(), fc.constantFrom('x'.repeat(300), '\t', 'é')), 6),
    )
    .map((entries) => Object.fromEntries(entries.filter((entry): entry is readonly [string, string] => entry !== null)));

  const credential = fc.oneof(
    { weight: 30, arbitrary: fc.constant<Credential>('valid') },
    { weight: 2, arbitrary: fc.constant<Credential>('bearer') },
    { weight: 1, arbitrary: fc.constantFrom<Credential>('missing', 'garbage', 'other-organisation', 'wrong-family', 'revoked', 'huge') },
  );
  const userCredential = fc.oneof(
    { weight: 12, arbitrary: fc.constant<UserCredential>('valid') },
    { weight: 1, arbitrary: fc.constantFrom<UserCredential>('missing', 'garbage', 'other-organisation', 'not-bearer') },
  );
  const host = fc.oneof(
    { weight: 30, arbitrary: fc.constant<HostChoice>('own') },
    { weight: 1, arbitrary: fc.constantFrom<HostChoice>('own-uppercase', 'own-with-port', 'other-organisation', 'unknown') },
  );

  return fc.record({
    credential,
    userCredential,
    host,
    pathParameters,
    query,
    body,
    framing: sendsBody ? framing : fc.oneof({ weight: 8, arbitrary: fc.constant({ kind: 'json' as const }) }, { weight: 1, arbitrary: framing }),
    headers,
  });
}

/** The bytes on the wire and the content headers, as the framing says. */
export function encodeBody(request: GeneratedRequest): { payload: Buffer | undefined; headers: Record<string, string> } {
  const { framing } = request;
  if (framing.kind === 'raw') {
    return { payload: framing.raw, headers: { 'content-type': 'application/json', ...(framing.encoding ? { 'content-encoding': framing.encoding } : {}) } };
  }
  if (!request.body) return { payload: undefined, headers: {} };
  const text = Buffer.from(toJsonText(request.body.value), 'utf8');
  switch (framing.kind) {
    case 'json':
      return { payload: text, headers: { 'content-type': 'application/json' } };
    case 'content-type':
      return { payload: text, headers: { 'content-type': framing.contentType } };
    case 'encoded': {
      const compress = { gzip: gzipSync, deflate: deflateSync, br: brotliCompressSync }[framing.encoding];
      return { payload: compress(text), headers: { 'content-type': 'application/json', 'content-encoding': framing.encoding } };
    }
    case 'mis-encoded':
      return { payload: text, headers: { 'content-type': 'application/json', 'content-encoding': framing.encoding } };
  }
}
