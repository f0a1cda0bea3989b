import { afterAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { addressRefusal, sendWebhook, webhookSecret, webhookUrlProblem } from '../infra/webhook-sender.ts';
import { startReceiver, type Receiver } from './support/webhook-receiver.ts';

/** One attempt against real receivers on the loopback interface: what is refused, what is not followed, how long it waits. */
describe('sending a webhook', () => {
  const receivers: Receiver[] = [];
  const receiver = async (...args: Parameters<typeof startReceiver>) => {
    const started = await startReceiver(...args);
    receivers.push(started);
    return started;
  };
  const secret = webhookSecret(new TextEncoder().encode('k'.repeat(40)), 'a'.repeat(24), 'key-1');
  const message = (url: string) => ({
    url,
    messageId: 'msg_1',
    body: JSON.stringify({ type: 'xp.awarded', timestamp: '2026-01-01T00:00:00.000Z', data: {} }),
    secrets: [secret],
  });

  afterAll(async () => {
    await Promise.all(receivers.map((started) => started.close()));
  });

  it('refuses private, loopback and link-local addresses, by literal or by name, unless allowed', async () => {
    const hooks = await receiver();
    const port = new URL(hooks.url).port;
    for (const url of [hooks.url, `http://localhost:${port}/hooks`, `http://[::ffff:127.0.0.1]:${port}/hooks`]) {
      const refused = await sendWebhook(message(url), { allowPrivateAddresses: false });
      expect(refused, url).toMatchObject({ statusCode: null, error: expect.stringMatching(/^refused: .*loopback address.*WEBHOOK_ALLOW_PRIVATE_ADDRESSES/) });
    }
    expect(hooks.received).toHaveLength(0);
    expect(await sendWebhook(message(hooks.url), { allowPrivateAddresses: true })).toMatchObject({ statusCode: 200, error: null });
    expect(hooks.received).toHaveLength(1);
  });

  it('classifies addresses: only global unicast ones are public', () => {
    expect(addressRefusal('8.8.8.8')).toBeNull();
    expect(addressRefusal('2001:4860:4860::8888')).toBeNull();
    expect(addressRefusal('10.1.2.3')).toMatch(/private/);
    expect(addressRefusal('192.168.1.1')).toMatch(/private/);
    expect(addressRefusal('169.254.169.254')).toMatch(/linkLocal/);
    expect(addressRefusal('fe80::1')).toMatch(/linkLocal/);
    expect(addressRefusal('fd00::1')).toMatch(/uniqueLocal/);
    expect(addressRefusal('0.0.0.0')).toMatch(/unspecified/);
    expect(webhookUrlProblem('https://10.0.0.5/hook', false)).toMatch(/private address/);
    expect(webhookUrlProblem('https://[::1]/hook', false)).toMatch(/loopback/);
    expect(webhookUrlProblem('https://10.0.0.5/hook', true)).toBeNull();
    expect(webhookUrlProblem('https://hooks.example.com/hook', false)).toBeNull();
  });

  it('does not follow a redirect: it is a failed attempt', async () => {
    const hooks = await receiver(() => 302);
    const result = await sendWebhook(message(hooks.url), { allowPrivateAddresses: true });
    expect(result).toMatchObject({ statusCode: 302, error: 'redirect not followed (HTTP 302)' });
    expect(hooks.received).toHaveLength(1);
  });

  it('gives up on a receiver that does not answer in time', async () => {
    const hooks = await receiver(() => 'hang');
    const result = await sendWebhook(message(hooks.url), { allowPrivateAddresses: true, timeoutMs: 300 });
    expect(result).toMatchObject({ statusCode: null, error: 'no answer within 0.3 s' });
    expect(result.durationMs).toBeGreaterThanOrEqual(250);
  });

  it('signs the exact body with every secret (Standard Webhooks), in the documented headers', async () => {
    const hooks = await receiver();
    const other = webhookSecret(new TextEncoder().encode('k'.repeat(40)), 'a'.repeat(24), 'key-2');
    expect(other).not.toBe(secret);
    await sendWebhook({ ...message(hooks.url), secrets: [secret, other] }, { allowPrivateAddresses: true });
    const [entry] = hooks.received;
    expect(entry!.headers['webhook-id']).toBe('msg_1');
    expect(entry!.headers['webhook-timestamp']).toMatch(/^\d{10}$/);
    for (const key of [secret, other]) expect(new Webhook(key).verify(entry!.body, entry!.headers as Record<string, string>)).toEqual(JSON.parse(entry!.body));
    expect(() =>
      new Webhook(webhookSecret(new TextEncoder().encode('x'.repeat(40)), 'a'.repeat(24), 'key-1')).verify(
        entry!.body,
        entry!.headers as Record<string, string>,
      ),
    ).toThrow();
  });
});
