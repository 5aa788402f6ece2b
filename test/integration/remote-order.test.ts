import type { Message as SqsMessage } from '@aws-sdk/client-sqs';
import { DeleteMessageCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqsEventOf } from '../../infra/local/pollers/sqs';
import {
  type ConsumedMessage,
  consumeSqsBatch,
  DynamoBroker,
  DynamoConnectionStore,
  DynamoRevocationStore,
  DynamoSchemaRegistry,
  messageGroupId,
  OutboxProducer,
} from '../../lib/aws';
import {
  AvroCodec,
  BROADCAST_TOPIC,
  BroadcastEvent,
  composeDelivery,
  decodeEnvelope,
  type EventType,
  type Fanout,
  type OutgoingMessage,
  type RemoteCommand,
  RemoteCommandEvent,
  withOrderedDisconnects,
} from '../../lib/core';
import { COMMANDS_KEY } from '../../lib/realtime/broadcasts/events';
import { InProcessTaskRunner, MemoryConnectionApi, MemorySessionCache } from '../../lib/testing';
import { revocationStoreContract } from '../contract/revocations';
import { testResources } from '../helpers/aws';
import { outboxPoller, relayFor } from '../helpers/relay';

const quiet = { error: () => {}, warn: () => {} };
const EXT = 'actioncable-v1-ext-json';

let env: Awaited<ReturnType<typeof testResources>>;
beforeAll(async () => {
  env = await testResources('remote-order', [
    { name: 'broadcast', topics: [BROADCAST_TOPIC], visibilityTimeout: 60 },
  ]);
});
afterAll(() => env?.dynamodb.destroy());

revocationStoreContract(
  'DynamoRevocationStore',
  async () => new DynamoRevocationStore({ client: env.dynamodb, tableName: env.tables.sessions }),
);

/**
 * The path of a remote command on the emulators: the outbox producer of `POST /_broadcast`,
 * the stream relay to the `broadcast` FIFO queue, and the broadcast consumer
 * (`functions/broadcast.ts`'s handling of broadcasts and commands: `DynamoBroker` over the
 * fan-out, with fan-out tasks run in process) on DynamoDB tables, posting to a memory API.
 */
function deliveryPath() {
  const { dynamodb, sqs, tables } = env;
  const queue = env.queues.broadcast!;
  const codec = new AvroCodec(
    new DynamoSchemaRegistry({ client: dynamodb, tableName: tables.schemas }),
  );
  const producer = new OutboxProducer({
    client: dynamodb,
    tableName: tables.outbox,
    topic: BROADCAST_TOPIC,
    eventTypes: [BroadcastEvent, RemoteCommandEvent] as EventType<unknown>[],
  });
  const { drain } = outboxPoller(
    env.outboxStreamArn!,
    relayFor(sqs, { [BROADCAST_TOPIC]: [queue.url] }),
  );
  const store = new DynamoConnectionStore({ client: dynamodb, tableName: tables.connections });
  const revocations = new DynamoRevocationStore({ client: dynamodb, tableName: tables.sessions });
  const api = new MemoryConnectionApi();
  let fanout: Fanout | undefined;
  const delivery = composeDelivery(
    {
      store,
      api,
      sessions: new MemorySessionCache(),
      revocations,
      tasks: { runner: new InProcessTaskRunner((task) => fanout!.runTask(task)) },
    },
    (broadcaster, sessions) =>
      new DynamoBroker({ client: dynamodb, historyTable: tables.history, sessions, broadcaster }),
  );
  fanout = delivery.fanout;
  const { broker } = delivery;

  /** What `functions/broadcast.ts` does with each message. */
  const handle = async (message: ConsumedMessage) => {
    if (message.type === BroadcastEvent.name) {
      const { stream, data } = await codec.decode(message.value, BroadcastEvent);
      await broker.handleBroadcast({
        stream,
        data,
        meta: { sourceOffset: String(message.offset) },
      });
    } else if (message.type === RemoteCommandEvent.name) {
      const { command, payload } = await codec.decode(message.value, RemoteCommandEvent);
      await broker.handleCommand({ command, payload: JSON.parse(payload) as unknown });
    } else {
      throw new Error(`unexpected ${message.type}`);
    }
  };

  /** One invocation of the consumer on `messages`, in that order; then they are deleted. */
  async function invoke(messages: readonly SqsMessage[]): Promise<void> {
    if (messages.length === 0) return;
    const response = await consumeSqsBatch(sqsEventOf(messages, queue.arn), handle, {
      group: 'broadcast',
      logger: quiet,
    });
    expect(response.batchItemFailures).toEqual([]);
    for (const m of messages) {
      await sqs.send(
        new DeleteMessageCommand({ QueueUrl: queue.url, ReceiptHandle: m.ReceiptHandle }),
      );
    }
  }

  /**
   * Consumes the queue in the order AWS may choose that this test fears most. SQS FIFO and
   * Lambda keep the order within a message group, never across groups (a group's messages
   * may come in a later batch, or in another invocation that runs later): here a group that
   * holds a remote command waits, in flight, until no other group has anything left to hand
   * over; then its messages are handled, in their order.
   */
  async function consumeCommandsLast(): Promise<void> {
    const held = new Map<string, SqsMessage[]>();
    for (;;) {
      const out = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queue.url,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 0,
          MessageSystemAttributeNames: ['All'],
        }),
      );
      const batch = out.Messages ?? [];
      if (batch.length === 0) {
        if (held.size === 0) return;
        await invoke([...held.values()].flat());
        held.clear();
        continue;
      }
      const groups = new Map<string, SqsMessage[]>();
      for (const m of batch) {
        const group = m.Attributes?.MessageGroupId ?? '';
        groups.set(group, [...(groups.get(group) ?? []), m]);
      }
      const now: SqsMessage[] = [];
      for (const [group, list] of groups) {
        const isCommand = (m: SqsMessage) =>
          decodeEnvelope(m.Body!).type === RemoteCommandEvent.name;
        if (held.has(group) || list.some(isCommand)) {
          held.set(group, [...(held.get(group) ?? []), ...list]);
        } else {
          now.push(...list);
        }
      }
      await invoke(now);
    }
  }

  /** A connection of `identity` subscribed to `stream`. */
  async function subscriber(connectionId: string, identity: string, stream: string) {
    await store.putConnection({
      connectionId,
      identity,
      sid: `sid-${connectionId}`,
      protocol: EXT,
      connectedAt: Date.now(),
    });
    await store.addSubscription({ connectionId, stream, identifier: `id-${stream}` });
  }

  const broadcast = (stream: string, data: string): Promise<OutgoingMessage> =>
    codec.encode(BroadcastEvent, { stream, data }).then((value) => ({
      key: BroadcastEvent.keyOf({ stream, data })!,
      type: BroadcastEvent.name,
      value,
    }));
  const command = async (
    payload: Record<string, unknown>,
    key = (c: { command: string; payload: string }) => RemoteCommandEvent.keyOf(c)!,
  ): Promise<OutgoingMessage> => {
    const value = { command: 'unsubscribe', payload: JSON.stringify(payload) };
    return {
      key: key(value),
      type: RemoteCommandEvent.name,
      value: await codec.encode(RemoteCommandEvent, value),
    };
  };
  /**
   * What `POST /_broadcast` commits for `commands`: each `disconnect` put in order first
   * (`inOrder` false: the commands as they are, a bare `RemoteCommandEvent` commit).
   */
  const ordered = async (commands: RemoteCommand[], inOrder = true): Promise<OutgoingMessage[]> => {
    const given = commands.map((command) => ({ kind: 'command' as const, command }));
    const { items } = inOrder ? await withOrderedDisconnects(store, given) : { items: given };
    return Promise.all(
      items.map(async (item) => {
        if (item.kind !== 'command') throw new Error('only commands here');
        return {
          key: RemoteCommandEvent.keyOf(item.command)!,
          type: RemoteCommandEvent.name,
          value: await codec.encode(RemoteCommandEvent, item.command),
        };
      }),
    );
  };
  /** The broadcast data each connection got. */
  const got = (connectionId: string) =>
    api
      .framesOf(connectionId)
      .filter((f) => (f as { type?: string }).type === undefined)
      .map((f) => (f as { message: unknown }).message);

  return {
    producer,
    drain,
    consumeCommandsLast,
    subscriber,
    broadcast,
    command,
    ordered,
    got,
    store,
    api,
  };
}

let unique = 0;
const fresh = (label: string) => `${label}-${process.pid}-${Date.now().toString(36)}-${++unique}`;

describe("a remote unsubscribe in commit order with its stream's broadcasts (outbox → relay → SQS FIFO → broadcast consumer)", () => {
  it.each([
    ['stream-wide', (_alice: string) => ({}), { alice: ['before'], bob: ['before'] }],
    [
      'for one identity',
      (alice: string) => ({ identity: alice }),
      { alice: ['before'], bob: ['before', 'after'] },
    ],
  ])(
    '%s: a broadcast committed after it reaches no removed subscriber, one committed before it does',
    async (_what, narrow, expected) => {
      const t = deliveryPath();
      const stream = fresh('room');
      const [alice, bob] = [fresh('alice'), fresh('bob')];
      await t.subscriber(`${alice}-c`, alice, stream);
      await t.subscriber(`${bob}-c`, bob, stream);
      // Three commits, one after the other.
      await t.producer.publish(await t.broadcast(stream, '"before"'));
      const unsubscribe = await t.command({ stream, ...narrow(alice) });
      expect(unsubscribe.key).toBe(stream);
      await t.producer.publish(unsubscribe);
      await t.producer.publish(await t.broadcast(stream, '"after"'));
      await t.drain();
      await t.consumeCommandsLast();
      expect(t.got(`${alice}-c`)).toEqual(expected.alice);
      expect(t.got(`${bob}-c`)).toEqual(expected.bob);
    },
  );

  it('holds for a command and a broadcast committed in one request (publishAll: one round each)', async () => {
    const t = deliveryPath();
    const stream = fresh('room');
    const alice = fresh('alice');
    await t.subscriber(`${alice}-c`, alice, stream);
    await t.producer.publishAll([
      await t.broadcast(stream, '"before"'),
      await t.command({ stream, identity: alice }),
      await t.broadcast(stream, '"after"'),
    ]);
    await t.drain();
    await t.consumeCommandsLast();
    expect(t.got(`${alice}-c`)).toEqual(['before']);
  });

  it('is what the shared key buys: keyed apart (the old `$commands#<stream>`), the same consumer delivers the later broadcast', async () => {
    const t = deliveryPath();
    const stream = fresh('room');
    const alice = fresh('alice');
    await t.subscriber(`${alice}-c`, alice, stream);
    await t.producer.publish(await t.broadcast(stream, '"before"'));
    const old = await t.command({ stream, identity: alice }, () => `${COMMANDS_KEY}#${stream}`);
    expect(messageGroupId(old.key)).not.toBe(messageGroupId(stream));
    await t.producer.publish(old);
    await t.producer.publish(await t.broadcast(stream, '"after"'));
    await t.drain();
    await t.consumeCommandsLast();
    // The removed subscriber got the broadcast committed after its removal.
    expect(t.got(`${alice}-c`)).toEqual(['before', 'after']);
    expect(await t.store.subscriptionOf(`${alice}-c`, stream)).toBeUndefined();
  });
});

describe('a remote disconnect in commit order with broadcasts (committed as POST /_broadcast does)', () => {
  /** Alice on two connections (room; other), Bob on one (room): then the kick, then broadcasts. */
  async function kickThenBroadcast(target: 'identity' | 'connectionId', ordered: boolean) {
    const t = deliveryPath();
    const [room, other] = [fresh('room'), fresh('other')];
    const [alice, bob] = [fresh('alice'), fresh('bob')];
    const [a1, a2, b1] = [`${alice}-1`, `${alice}-2`, `${bob}-1`];
    await t.subscriber(a1, alice, room);
    await t.subscriber(a2, alice, other);
    await t.subscriber(b1, bob, room);
    await t.producer.publish(await t.broadcast(room, '"before"'));
    await t.producer.publish(await t.broadcast(other, '"before"'));
    const kick: RemoteCommand = {
      command: 'disconnect',
      payload: JSON.stringify(target === 'identity' ? { identity: alice } : { connectionId: a1 }),
    };
    const messages = await t.ordered([kick], ordered);
    await t.producer.publishAll(messages);
    await t.producer.publish(await t.broadcast(room, '"after"'));
    await t.producer.publish(await t.broadcast(other, '"after"'));
    await t.drain();
    await t.consumeCommandsLast();
    return { t, a1, a2, b1, messages };
  }

  it("of an identity: no broadcast committed after it reaches any of the identity's connections, one committed before it does", async () => {
    const { t, a1, a2, b1, messages } = await kickThenBroadcast('identity', true);
    expect(messages.map((m) => m.type)).toEqual([
      RemoteCommandEvent.name,
      RemoteCommandEvent.name,
      RemoteCommandEvent.name,
    ]);
    expect(t.got(a1)).toEqual(['before']);
    expect(t.got(a2)).toEqual(['before']);
    expect(t.got(b1)).toEqual(['before', 'after']);
    // And the disconnect itself ran: each of alice's connections got its frame and was closed.
    for (const c of [a1, a2]) {
      expect(t.api.framesOf(c).at(-1)).toEqual({
        type: 'disconnect',
        reason: 'remote',
        reconnect: true,
      });
    }
  });

  it("of one connection: no later broadcast reaches it; the identity's other connection keeps getting its own", async () => {
    const { t, a1, a2, b1 } = await kickThenBroadcast('connectionId', true);
    expect(t.got(a1)).toEqual(['before']);
    expect(t.got(a2)).toEqual(['before', 'after']);
    expect(t.got(b1)).toEqual(['before', 'after']);
  });

  it('is what the ordering buys: a bare disconnect, handled last, lets the later broadcasts through', async () => {
    const { t, a1, a2 } = await kickThenBroadcast('identity', false);
    expect(t.got(a1)).toEqual(['before', 'after']);
    expect(t.got(a2)).toEqual(['before', 'after']);
  });
});
