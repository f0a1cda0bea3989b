import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitUntil } from './support/projections.ts';
import { adminOf } from './support/programme.ts';
import { asTenant, startTestService, type TestService } from './support/service.ts';
import { startReceiver, type Receiver } from './support/webhook-receiver.ts';

const SECRET = 's'.repeat(48);

/**
 * A job worker killed (SIGKILL) in the middle of a delivery: the delivery's job is recorded in PostgreSQL,
 * so the next worker sends it again (the same `webhook-id`), and every delivery arrives; none is lost, none
 * invented. The projectors run in this process, the jobs in child processes.
 */
describe('a worker killed mid-delivery', () => {
  let t: TestService;
  let receiver: Receiver;
  const children: ChildProcess[] = [];

  const startWorker = async () => {
    const env = {
      ...process.env,
      DATABASE_URL: t.service.config.databaseUrl ?? '',
      REDIS_URL: t.service.config.redisUrl ?? '',
      USER_TOKEN_SECRET: SECRET,
      WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'true',
      LOG_LEVEL: 'silent',
    };
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/webhook-worker.ts'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await waitUntil(() => output.includes('READY'), 60_000, 'the worker to start');
    return child;
  };

  beforeAll(async () => {
    t = await startTestService({ jobs: false, env: { USER_TOKEN_SECRET: SECRET, WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'true' } });
    // The first request ever is left hanging: the worker that sent it is killed while it waits.
    receiver = await startReceiver((_entry, index) => (index === 0 ? 'hang' : 200));
  }, 60_000);
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await receiver?.close();
    await t?.close();
  });

  it('loses no delivery and invents none', async () => {
    if (!t.service.config.databaseUrl) return expect(t.service.config.databaseUrl, 'a worker process needs a PostgreSQL server').toBeTruthy();
    const acme = await t.createOrganisation('crash');
    const admin = adminOf(t, acme);
    const community = await admin.community('Club');
    const member = await admin.user('crash-1', [community]);
    const hook = (await admin.post('/webhooks', { url: receiver.url, eventTypes: ['custom_event.logged'] })) as { id: string; secret: string };
    for (let i = 0; i < 5; i++) await admin.post('/events/custom', { eventName: `event-${i}`, userId: member.id, communityId: community, payload: { i } });
    await t.settle();

    const first = await startWorker();
    await waitUntil(() => receiver.received.length >= 1, 30_000, 'the first request');
    first.kill('SIGKILL');
    await once(first, 'exit');
    const killedId = receiver.received[0]!.headers['webhook-id'];

    await startWorker();
    const log = async () => {
      await t.settle();
      return (await t.request('GET', `/api/v2/admin/webhooks/${hook.id}/deliveries?limit=100`, asTenant(acme))).body.edges as any[];
    };
    await waitUntil(async () => (await log()).every((delivery) => delivery.outcome === 'succeeded'), 60_000, 'every delivery to succeed');

    const deliveries = await log();
    expect(deliveries).toHaveLength(5);
    const ids = new Set(receiver.received.map((entry) => entry.headers['webhook-id']));
    expect(ids).toEqual(new Set(deliveries.map((delivery) => delivery.messageId)));
    // The message the killed worker was sending was sent again, with the same id; it was attempted once as far as the log knows.
    expect(receiver.received.filter((entry) => entry.headers['webhook-id'] === killedId).length).toBeGreaterThanOrEqual(2);
    expect(deliveries.find((delivery) => delivery.messageId === killedId)).toMatchObject({ outcome: 'succeeded', attemptCount: 1, lastStatusCode: 200 });
    for (const entry of receiver.received) expect(receiver.verify(hook.secret, entry)).toEqual(entry.json);
    expect(new Set(receiver.received.map((entry) => entry.json.data.name))).toEqual(new Set(['event-0', 'event-1', 'event-2', 'event-3', 'event-4']));
  }, 180_000);
});
