import { createHmac } from 'node:crypto';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { Webhook } from 'standardwebhooks';
import type { AttemptResult } from '../domain/webhook.ts';

/**
 * Sending one webhook message (the Standard Webhooks way): signed headers, a bounded wait, no redirects,
 * and no private, loopback or link-local address unless the operator allows them.
 */

/** Per attempt, from the connection to the end of the answer. */
export const ATTEMPT_TIMEOUT_MS = 10_000;
/** Of an answer, at most this much is read (and dropped): a receiver that streams forever does not hold a worker. */
const MAX_RESPONSE_BYTES = 64 * 1024;

/**
 * An endpoint's signing secret, `whsec_` and 32 bytes in base64. It is stored nowhere: derived from the
 * server's key (`USER_TOKEN_SECRET`, or the one generated into `DATA_DIR`), the endpoint's id and the
 * secret's key id (random, recorded in the endpoint's events), so the log and the read models never hold
 * it and the delivery worker derives it again whenever it signs.
 */
export function webhookSecret(serverKey: Uint8Array, webhookId: string, secretKeyId: string): string {
  const key = createHmac('sha256', serverKey).update(`engage-webhook-secret\n${webhookId}\n${secretKeyId}`).digest();
  return `whsec_${key.toString('base64')}`;
}

/** The Standard Webhooks headers of a message: one `v1,<signature>` per secret, space-separated. */
export function signedHeaders(messageId: string, body: string, secrets: readonly string[], at: Date): Record<string, string> {
  return {
    'webhook-id': messageId,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': secrets.map((secret) => new Webhook(secret).sign(messageId, at, body)).join(' '),
  };
}

/** Why an address may not be sent to, or null when it is a public (global unicast) one. */
export function addressRefusal(address: string): string | null {
  if (!ipaddr.isValid(address)) return `${address} is not an IP address`;
  // An IPv4-mapped IPv6 address (::ffff:127.0.0.1) is judged as the IPv4 address it is.
  const range = ipaddr.process(address).range();
  return range === 'unicast' ? null : `${address} is a ${range} address`;
}

class RefusedAddress extends Error {}

/** What a URL may be given when an endpoint is created or changed: a literal address is judged at once. */
export function webhookUrlProblem(url: string, allowPrivateAddresses: boolean): string | null {
  const host = new URL(url).hostname.replace(/^\[(.*)\]$/, '$1');
  if (allowPrivateAddresses || isIP(host) === 0) return null;
  const refusal = addressRefusal(host);
  return refusal && `${refusal}; webhooks are only sent to public addresses (the operator may allow others with WEBHOOK_ALLOW_PRIVATE_ADDRESSES)`;
}

/**
 * Resolves a host and refuses it when any of its addresses is not public, so the connection goes only to
 * an address that was checked (a name that resolves to a public and a private address is refused whole).
 */
function guardedLookup(allowPrivateAddresses: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { all: true, family: options.family ?? 0 }, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error, '', 0);
      const refusals = allowPrivateAddresses ? [] : addresses.map((entry) => addressRefusal(entry.address)).filter((refusal) => refusal !== null);
      if (addresses.length === 0) return callback(new Error(`${hostname} has no address`), '', 0);
      if (refusals.length > 0) return callback(new RefusedAddress(`${hostname} resolves to ${refusals.join(', ')}`), '', 0);
      if (options.all) return (callback as unknown as (error: null, addresses: LookupAddress[]) => void)(null, addresses);
      callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

export interface WebhookRequest {
  url: string;
  messageId: string;
  /** The JSON document, sent as is (the signature covers these exact bytes). */
  body: string;
  secrets: readonly string[];
}

export interface SendOptions {
  allowPrivateAddresses: boolean;
  timeoutMs?: number;
  /** The signature's time: the receiver compares it with its own clock, so it is the wall clock's. */
  now?: () => Date;
}

/** One attempt: the receiver's status, or why none came. Never throws. */
export async function sendWebhook(request: WebhookRequest, options: SendOptions): Promise<AttemptResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const timeoutMs = options.timeoutMs ?? ATTEMPT_TIMEOUT_MS;
  const url = new URL(request.url);
  const literal = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (!options.allowPrivateAddresses && isIP(literal) !== 0) {
    const refusal = addressRefusal(literal);
    if (refusal) return { statusCode: null, error: `refused: ${refusal} (WEBHOOK_ALLOW_PRIVATE_ADDRESSES is not set)`, durationMs: elapsed() };
  }
  const headers = {
    'content-type': 'application/json',
    'user-agent': 'engage-webhooks/1.0',
    ...signedHeaders(request.messageId, request.body, request.secrets, (options.now ?? (() => new Date()))()),
  };
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  try {
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      const outgoing = send(url, {
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(request.body)) },
        lookup: guardedLookup(options.allowPrivateAddresses),
        signal: AbortSignal.timeout(timeoutMs),
        agent: false,
      });
      outgoing.once('response', (incoming) => {
        // The answer's body is read to its end (bounded) within the same deadline, then dropped.
        let size = 0;
        incoming.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_RESPONSE_BYTES) incoming.destroy();
        });
        incoming.once('end', () => resolve(incoming));
        incoming.once('close', () => resolve(incoming));
        incoming.once('error', reject);
      });
      outgoing.once('error', reject);
      outgoing.end(request.body);
    });
    const statusCode = response.statusCode ?? 0;
    if (statusCode >= 200 && statusCode < 300) return { statusCode, error: null, durationMs: elapsed() };
    const location = response.headers.location;
    const error =
      statusCode >= 300 && statusCode < 400
        ? `redirect not followed (HTTP ${statusCode}${location ? ` to ${String(location).slice(0, 200)}` : ''})`
        : `HTTP ${statusCode}`;
    return { statusCode, error, durationMs: elapsed() };
  } catch (error) {
    return { statusCode: null, error: describe(error, timeoutMs), durationMs: elapsed() };
  }
}

function describe(error: unknown, timeoutMs: number): string {
  if (error instanceof RefusedAddress) return `refused: ${error.message} (WEBHOOK_ALLOW_PRIVATE_ADDRESSES is not set)`;
  const named = error as { name?: string; code?: string; message?: string };
  if (named.name === 'TimeoutError' || named.name === 'AbortError' || named.code === 'ABORT_ERR') return `no answer within ${timeoutMs / 1000} s`;
  return named.code ? `${named.code}: ${named.message ?? ''}`.trim() : (named.message ?? String(error));
}
