import type { IncomingHttpHeaders } from 'node:http';
import express, { type Request, type RequestHandler } from 'express';
import { badRequest, HttpError, type ErrorBody } from './errors.ts';

/**
 * What text the service accepts, decided once for every route before any of them sees the request:
 * every string of a JSON body (values and object keys, at any depth), every query parameter and every path
 * segment must be well-formed Unicode without NUL. PostgreSQL cannot store U+0000 in text or JSONB, and an
 * unpaired UTF-16 surrogate is no character at all, so both would otherwise fail deep inside a write (a 500)
 * or be silently mangled. Bodies nest at most MAX_JSON_DEPTH levels (the deepest request schema needs about
 * ten), which keeps every later recursive walk (validation, hashing, serialisation) shallow.
 */
export const MAX_JSON_DEPTH = 32;

export const TEXT_RULES =
  'Text is well-formed Unicode (UTF-8 on the wire) without NUL: a NUL (U+0000) or an unpaired surrogate (\\ud800) in a body string or key, ' +
  `a query parameter or a path segment, a path that is not valid percent-encoded UTF-8, or a body nested deeper than ${MAX_JSON_DEPTH} levels ` +
  'is a 400 naming where it was. A body whose Content-Encoding (gzip, deflate, br) does not match it is a 400; any other encoding a 415.';

type Issue = NonNullable<ErrorBody['issues']>[number];
type Segment = string | number;

/** At most this many issues are listed: enough to fix a request, too few to amplify a hostile one. */
const MAX_ISSUES = 20;

const NUL = '\u0000';
// Without the `u` flag the pattern sees UTF-16 code units: a high surrogate not followed by a low one, or a low one not preceded by a high one.
const UNPAIRED_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Why `text` is not accepted, or null. */
export function textProblem(text: string): string | null {
  if (text.includes(NUL)) return 'must not contain NUL (U+0000)';
  if (UNPAIRED_SURROGATE.test(text)) return 'must be well-formed Unicode (it contains an unpaired surrogate)';
  return null;
}

function issue(path: Segment[], problem: string): Issue {
  return { message: `${path.join('.')}: ${problem}`, path };
}

/**
 * The problems of a parsed JSON value (or query object) under `root`: bad text in values and keys (a bad key
 * is named by the object that holds it, so the answer does not echo it), and nesting past MAX_JSON_DEPTH.
 * Iterative, so a hostile depth cannot overflow the stack here.
 */
export function jsonProblems(value: unknown, root: Segment): Issue[] {
  const problems: Issue[] = [];
  const pending: { value: unknown; path: Segment[] }[] = [{ value, path: [root] }];
  while (pending.length > 0 && problems.length < MAX_ISSUES) {
    const { value: current, path } = pending.pop()!;
    if (typeof current === 'string') {
      const problem = textProblem(current);
      if (problem) problems.push(issue(path, problem));
      continue;
    }
    if (current === null || typeof current !== 'object') continue;
    if (path.length > MAX_JSON_DEPTH) {
      problems.push(issue([root], `nested deeper than ${MAX_JSON_DEPTH} levels`));
      break;
    }
    const entries: [Segment, unknown][] = Array.isArray(current) ? current.map((item, index) => [index, item]) : Object.entries(current);
    for (const [key] of entries) {
      const problem = typeof key === 'string' ? textProblem(key) : null;
      if (problem) problems.push(issue(path, `a key ${problem}`));
    }
    // Pushed last to first, so that they are visited, and their problems listed, in document order.
    for (let index = entries.length - 1; index >= 0; index--) pending.push({ value: entries[index]![1], path: [...path, entries[index]![0]] });
  }
  return problems.slice(0, MAX_ISSUES);
}

/** The problems of a raw (still percent-encoded) URL path. */
export function pathProblems(rawPath: string): Issue[] {
  for (const segment of rawPath.split('/')) {
    let decoded: string;
    try {
      decoded = decodeURIComponent(segment);
    } catch {
      return [issue(['path'], 'is not valid percent-encoded UTF-8')];
    }
    const problem = textProblem(decoded);
    if (problem) return [issue(['path'], problem)];
  }
  return [];
}

/**
 * A client's own id for tracing (`x-request-id`, `x-correlation-id`), kept only when it is 1 to 128 letters,
 * digits, `_`, `.` or `-`: it is logged and stored in every event's metadata, so it must stay small and plain.
 */
export function clientTraceId(value: unknown): string | undefined {
  return typeof value === 'string' && /^[\w.-]{1,128}$/.test(value) ? value : undefined;
}

/**
 * Refuses a request whose path or query string holds text the service does not accept (before any route runs).
 * A URL without a percent sign whose own text is accepted is accepted whole: nothing in it decodes to anything
 * else, and the query parser nests far less than MAX_JSON_DEPTH. Its query, which express parses again at every
 * read, is then not read here (the common case; a segment-by-segment decode and a query walk otherwise).
 */
export const acceptedPathAndQuery: RequestHandler = (req, _res, next) => {
  if (!req.url.includes('%') && textProblem(req.url) === null) {
    next();
    return;
  }
  const problems = [...pathProblems(req.path), ...jsonProblems(req.query, 'query')];
  next(problems.length > 0 ? badRequest(problems) : undefined);
};

/**
 * Requests whose raw JSON body can hold no problem `jsonProblems` finds (`mayHoldProblems`), marked as the body
 * is read: the walk over every value and key of every body was 1 to 2% of a custom event's CPU.
 */
const plainBodies = new WeakSet<object>();

/** Bodies larger than this are not scanned for brackets: they are walked (`jsonProblems`) instead. */
const COUNTED_BODY_BYTES = 4096;

/**
 * Whether a raw JSON text may hold what `jsonProblems` refuses. A NUL or an unpaired surrogate can only be
 * written as a `\u` escape (JSON refuses raw control characters in strings, and UTF-8 decoding turns an
 * encoded surrogate into U+FFFD), and nesting past MAX_JSON_DEPTH takes more opening brackets than that.
 */
export function mayHoldProblems(raw: Buffer): boolean {
  if (raw.length > COUNTED_BODY_BYTES || raw.includes('\\u')) return true;
  let opening = 0;
  for (let index = 0; index < raw.length; index++) {
    const byte = raw[index];
    if (byte === 0x5b || byte === 0x7b) opening++;
  }
  return opening > MAX_JSON_DEPTH;
}

/**
 * A batch (`POST .../batch` with a JSON array body) holds independent items: its route checks each item's
 * text with `jsonProblems` and refuses that item only, not the batch.
 */
export function isItemwiseBatch(req: { method: string; path: string; body?: unknown }): boolean {
  return req.method === 'POST' && Array.isArray(req.body) && req.path.endsWith('/batch');
}

/** Refuses a JSON body holding text the service does not accept, or nested too deeply (a batch's items are the route's to check). */
const acceptedBody: RequestHandler = (req, _res, next) => {
  const problems = req.body === undefined || plainBodies.has(req) || isItemwiseBatch(req) ? [] : jsonProblems(req.body, 'body');
  next(problems.length > 0 ? badRequest(problems) : undefined);
};

/**
 * The JSON body parser (with its size limit and gzip, deflate and br decoding), its failures told in the
 * contract's terms, then the text check of the parsed body.
 */
export function jsonBody(limit: string): RequestHandler[] {
  const parse = express.json({
    limit,
    strict: true,
    // JSON by any of its media types (`application/json`, and `application/vnd.api+json` and the like).
    type: ['application/json', 'application/*+json'],
    // The bytes as they came (inflated, not yet decoded). The contract takes UTF-8 only (a 415 otherwise, as the
    // API description says), where body-parser reads any `utf-` charset: refused here, as its own charset errors.
    verify: (req, _res, raw, encoding) => {
      if (encoding !== 'utf-8') throw Object.assign(new Error(`unsupported charset "${encoding}"`), { type: 'charset.unsupported' });
      if (!mayHoldProblems(raw)) plainBodies.add(req);
    },
  });
  const limitBytes = bytesOf(limit);
  const parseTold: RequestHandler = (req, res, next) => {
    const told = (error?: unknown) => next(error === undefined ? undefined : unreadableBody(error, req.get('content-encoding')));
    const length = plainJsonLength(req.headers);
    if (length !== null && limitBytes !== null && length <= limitBytes) readPlainJson(req, length, told);
    else
      parse(req, res, (error?: unknown) => {
        // A body of another media type (text/plain, a form) would reach the route as no body at all, and its
        // schema would say `expected object, received undefined`: the request's real problem is its type.
        if (error === undefined && req.body === undefined && hasBody(req)) return next(unsupportedMediaType());
        told(error);
      });
  };
  return [parseTold, acceptedBody];
}

/** A size such as config's BODY_LIMIT (`100kb`, `1mb`: units of 1,024, as body-parser reads them); null for another form. */
function bytesOf(limit: string): number | null {
  const match = /^(\d+)(b|kb|mb)$/i.exec(limit);
  if (!match) return null;
  return Number(match[1]) * { b: 1, kb: 1024, mb: 1024 * 1024 }[match[2]!.toLowerCase() as 'b' | 'kb' | 'mb'];
}

/**
 * The declared length of a body that is plain JSON: `Content-Type: application/json` (in UTF-8, said or not), no
 * Content-Encoding, a Content-Length of at least one byte. Null for anything else, which body-parser reads.
 */
function plainJsonLength(headers: IncomingHttpHeaders): number | null {
  const type = headers['content-type']?.toLowerCase();
  if (type !== 'application/json' && type !== 'application/json; charset=utf-8' && type !== 'application/json;charset=utf-8') return null;
  if (headers['content-encoding'] !== undefined || headers['content-length'] === undefined) return null;
  const length = Number(headers['content-length']);
  return Number.isInteger(length) && length > 0 ? length : null;
}

/**
 * Reads a plain JSON body (`plainJsonLength`) as body-parser would, with its errors (`strict`: an object or an
 * array; a leading BOM dropped; `request.aborted`, `request.size.invalid`, `entity.parse.failed`), without
 * its general path (media-type parsing, a decoder stream, a raw-body reader): at the command API's rate that
 * was 0.02 ms of a request's 0.15 in the HTTP plumbing (2026-12-06). Every other body goes to body-parser.
 */
function readPlainJson(req: Request, length: number, done: (error?: unknown) => void): void {
  const chunks: Buffer[] = [];
  let received = 0;
  let finished = false;
  const finish = (error?: unknown) => {
    if (finished) return;
    finished = true;
    req.off('data', onData).off('end', onEnd).off('close', onClose).off('error', onError);
    done(error);
  };
  const onData = (chunk: Buffer) => {
    chunks.push(chunk);
    received += chunk.length;
  };
  // Cut short (the client went) or failed: a 400 the body could not be read, as body-parser answers both.
  const onClose = () => {
    if (!req.complete) finish(Object.assign(new Error('request aborted'), { type: 'request.aborted', status: 400 }));
  };
  const onError = (error: Error) => finish(Object.assign(new Error('request could not be read', { cause: error }), { status: 400 }));
  const onEnd = () => {
    if (received !== length)
      return finish(Object.assign(new Error('request size did not match content length'), { type: 'request.size.invalid', status: 400 }));
    const raw = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, received);
    let text = raw.toString('utf8');
    if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    const first = /^[\x20\x09\x0a\x0d]*([^\x20\x09\x0a\x0d])/.exec(text)?.[1];
    if (first !== '{' && first !== '[')
      return finish(Object.assign(new SyntaxError('Unexpected token: not an object or an array'), { type: 'entity.parse.failed', status: 400 }));
    try {
      req.body = JSON.parse(text) as unknown;
    } catch (error) {
      return finish(Object.assign(error as Error, { type: 'entity.parse.failed', status: 400 }));
    }
    (req as { _body?: boolean })._body = true;
    if (!mayHoldProblems(raw)) plainBodies.add(req);
    finish();
  };
  req.on('data', onData).on('end', onEnd).on('close', onClose).on('error', onError);
}

/** Whether the request carries a body, as body-parser tells (a length above 0, or chunks). */
function hasBody(req: Request): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

function unsupportedMediaType(): HttpError {
  return new HttpError(415, 'UNSUPPORTED_MEDIA_TYPE', 'Unsupported body type: send JSON with Content-Type: application/json');
}

function unreadableBody(error: unknown, contentEncoding: string | undefined): unknown {
  const failure = error as { type?: string; status?: number };
  switch (failure?.type) {
    case 'entity.too.large':
      return new HttpError(413, 'PAYLOAD_TOO_LARGE', 'Request body is too large');
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new HttpError(415, 'UNSUPPORTED_MEDIA_TYPE', 'Unsupported body encoding: send JSON in UTF-8, as is or with Content-Encoding gzip, deflate or br');
    case 'entity.parse.failed':
      return badRequest([issue(['body'], 'is not valid JSON')]);
  }
  // What is left with a client-error status: the body did not decode as its Content-Encoding says, or arrived cut short.
  if (typeof failure?.status === 'number' && failure.status >= 400 && failure.status < 500) {
    return badRequest([issue(['body'], contentEncoding ? `is not valid ${contentEncoding} data` : 'could not be read')]);
  }
  return error;
}
