import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import express, { Router, type RequestHandler } from 'express';
import { z } from 'zod';
import { EARLIEST_DATE, LATEST_DATE } from './contract/common.ts';
import { TEXT_RULES } from '../infra/http/accepted-input.ts';

/**
 * Routes declared once, with the zod schemas that validate them; the same declarations produce the
 * family's OpenAPI 3.1 document, served at `/api/v2/<family>/openapi.json` with a browsable page at `/docs`.
 */
export interface Operation {
  method: 'get' | 'post' | 'patch' | 'put' | 'delete';
  /** Express-style path relative to the family, e.g. `/leaderboards/:leaderboardConfigId`. */
  path: string;
  /** Stable and readable (`createLeaderboard`): what generated clients name the call. */
  operationId?: string;
  summary: string;
  description?: string;
  tag: string;
  body?: z.ZodType;
  /** A request body as a client would send it, shown in the document (and checked against `body` by the linter). */
  example?: unknown;
  query?: z.ZodType;
  headers?: { name: string; description: string; required?: boolean }[];
  responses: Record<number, { description: string; schema?: z.ZodType }>;
}

export const errorBodySchema = z
  .object({
    message: z.string(),
    code: z.string(),
    issues: z.array(z.object({ message: z.string(), path: z.array(z.union([z.string(), z.number()])).optional() })).optional(),
  })
  .meta({ id: 'Error' });

/** The bounds every request meets, beside the maxLength and maxItems of each field. */
const LIMITS =
  'Every string and array of a request has a maximum (`maxLength`, `maxItems`); ' +
  `dates and date-times lie between ${EARLIEST_DATE} and ${LATEST_DATE} (UTC); ` +
  'unknown fields of a distribution body (and of the other bodies that say so) are a 400.';

const errorDescriptions: Record<number, string> = {
  400: 'Invalid input data (`BAD_REQUEST`, with `issues`)',
  401: 'Missing, unknown, revoked or wrong-domain token (`UNAUTHORIZED`)',
  403: 'The token lacks this API family (`FORBIDDEN`)',
  404: 'Not found (`NOT_FOUND`)',
  409: 'Conflict with the current state or a concurrent write, or an `Idempotency-Key` already used for another request (`CONFLICT`)',
  413: 'Body too large (`PAYLOAD_TOO_LARGE`)',
  415: 'A body that is not JSON (a Content-Type other than application/json or application/*+json), a Content-Encoding other than gzip, deflate or br, or a charset other than UTF-8 (`UNSUPPORTED_MEDIA_TYPE`)',
  429: 'Rate limit spent for this API token, user or address (`TOO_MANY_REQUESTS`, with `Retry-After` and `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset`, `RateLimit-Policy`, which every answer carries)',
  500: 'Internal server error (`INTERNAL_SERVER_ERROR`)',
  503: 'A backing store or read model is not available yet (`SERVICE_UNAVAILABLE`, with `Retry-After`)',
};

/** Every path an API family's `ApiDescription.router` answers, under the family's mount (any case, a trailing slash or not). */
export const DOCUMENT_PATHS = /^\/(?:openapi\.json\/?|docs(?:\/.*)?)$/i;

export class ApiDescription {
  private readonly operations: Operation[] = [];

  constructor(
    readonly family: 'admin' | 'integration' | 'analytics',
    private readonly title: string,
    private readonly description: string,
  ) {}

  /** Registers the operation for the document and mounts its handlers on the router. */
  route(router: Router, operation: Operation, ...handlers: RequestHandler[]): void {
    this.operations.push(operation);
    router[operation.method](operation.path, ...handlers);
  }

  document(): Record<string, unknown> {
    const schemas: Record<string, unknown> = {};
    const toSchema = (schema: z.ZodType, io: 'input' | 'output') => {
      const generated = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any', metadata: z.globalRegistry });
      // Named schemas (`.meta({id})`) become shared components instead of per-operation definitions.
      const json = JSON.parse(JSON.stringify(generated).replaceAll('"#/$defs/', '"#/components/schemas/')) as Record<string, any>;
      for (const [id, definition] of Object.entries((json.$defs ?? {}) as Record<string, unknown>)) schemas[id] = definition;
      delete json.$defs;
      delete json.$schema;
      return json;
    };
    const paths: Record<string, Record<string, unknown>> = {};
    for (const op of this.operations) {
      const path = op.path.replace(/:(\w+)/g, '{$1}');
      const parameters = [
        ...[...op.path.matchAll(/:(\w+)/g)].map((match) => ({ name: match[1], in: 'path', required: true, schema: { type: 'string' } })),
        ...queryParameters(op.query, (schema) => toSchema(schema, 'input')),
        ...(op.headers ?? []).map((header) => ({
          name: header.name,
          in: 'header',
          required: header.required ?? false,
          description: header.description,
          schema: { type: 'string' },
        })),
      ];
      const responses: Record<string, unknown> = {};
      for (const [status, response] of Object.entries(op.responses)) {
        responses[status] = {
          description: response.description,
          ...(response.schema ? { content: { 'application/json': { schema: toSchema(response.schema, 'output') } } } : {}),
        };
      }
      // What any such operation may answer: a path id names nothing (404), an Idempotency-Key already used
      // for another request (409).
      const idempotent = (op.headers ?? []).some((header) => header.name.toLowerCase() === 'idempotency-key');
      const generic = [
        400,
        401,
        403,
        ...(op.method === 'get' || op.path.includes(':') ? [404] : []),
        ...(idempotent ? [409] : []),
        ...(op.body ? [413, 415] : []),
        429,
        500,
      ];
      for (const status of generic) {
        responses[String(status)] ??= {
          description: errorDescriptions[status],
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
        };
      }
      paths[path] ??= {};
      paths[path][op.method] = {
        operationId: op.operationId ?? derivedOperationId(op),
        summary: op.summary,
        ...(op.description ? { description: op.description } : {}),
        tags: [op.tag],
        parameters,
        ...(op.body
          ? {
              requestBody: {
                required: true,
                content: { 'application/json': { schema: toSchema(op.body, 'input'), ...(op.example === undefined ? {} : { example: op.example }) } },
              },
            }
          : {}),
        responses,
      };
    }
    // Registers the named `Error` schema among the components (its own JSON is a reference to itself).
    toSchema(errorBodySchema, 'output');
    return {
      openapi: '3.1.0',
      info: {
        title: this.title,
        version: '1.0.0',
        description: `${this.description}\n\n**Input.** ${TEXT_RULES} ${LIMITS}`,
        license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
      },
      // The organisation is the one that owns the domain a request is sent to.
      servers: [
        {
          url: `https://{organisationDomain}/api/v2/${this.family}`,
          description: "The organisation's domain: its standard subdomain, a custom subdomain or a white-label domain",
          variables: { organisationDomain: { default: 'acme.engage.example.com', description: "your organisation's domain" } },
        },
        {
          url: `http://{slug}.localhost:3000/api/v2/${this.family}`,
          description: 'A local embedded server (the quick start)',
          variables: { slug: { default: 'acme', description: "the organisation's slug" } },
        },
      ],
      // The integration family identifies the end user too, with a user token issued through the admin API.
      security: [this.family === 'integration' ? { apiToken: [], userToken: [] } : { apiToken: [] }],
      paths,
      components: {
        schemas,
        securitySchemes: {
          apiToken: {
            type: 'apiKey',
            in: 'header',
            name: 'x-api-token',
            description: 'An organisation API token (`eng_<prefix>_<secret>`); a `Bearer ` prefix is accepted',
          },
          ...(this.family === 'integration'
            ? { userToken: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'A user token from `POST /api/v2/admin/users/{id}/tokens`' } }
            : {}),
        },
      },
    };
  }

  /** `GET /openapi.json` and a Swagger UI page at `GET /docs`, served without credentials (`DOCUMENT_PATHS`). */
  router(): Router {
    const router = Router();
    const document = () => this.document();
    let cached: Record<string, unknown> | null = null;
    router.get('/openapi.json', (_req, res) => {
      cached ??= document();
      res.json(cached);
    });
    router.use('/docs/assets', express.static(swaggerUiDirectory(), { index: false, maxAge: '1d' }));
    router.get('/docs', (req, res) => {
      const base = req.baseUrl;
      res.type('html').send(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${this.title}</title>
<link rel="stylesheet" href="${base}/docs/assets/swagger-ui.css"></head>
<body><div id="api"></div>
<script src="${base}/docs/assets/swagger-ui-bundle.js"></script>
<script>SwaggerUIBundle({ url: '${base}/openapi.json', dom_id: '#api' });</script>
</body></html>`);
    });
    return router;
  }
}

/** What a query schema's JSON Schema (an object) tells of its parameters. */
interface QueryJsonSchema {
  required?: string[];
  properties?: Record<string, { description?: string }>;
}

function queryParameters(query: z.ZodType | undefined, toSchema: (schema: z.ZodType) => QueryJsonSchema) {
  if (!query) return [];
  const json = toSchema(query);
  const required = new Set<string>(json.required ?? []);
  return Object.entries(json.properties ?? {}).map(([name, schema]) => ({
    name,
    in: 'query',
    required: required.has(name),
    ...(schema.description ? { description: schema.description } : {}),
    schema,
  }));
}

/** For an operation declared without an id: its method and path, camel-cased (`post /events/custom` → `postEventsCustom`). */
function derivedOperationId(op: Operation): string {
  const words = `${op.method} ${op.path}`.split(/[^A-Za-z0-9]+/).filter(Boolean);
  return words.map((word, index) => (index === 0 ? word.toLowerCase() : word[0]!.toUpperCase() + word.slice(1))).join('');
}

function swaggerUiDirectory(): string {
  return dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
}
