import { describe, expect, it } from 'vitest';
import { redeliveryOf, resolveBrokerConfig } from '../../../lib/broker/history';
import {
  AvroValueError,
  type Broadcaster,
  ConfigError,
  composeDelivery,
  createEventSender,
  defaultBrokerConfig,
  defineEvent,
  EventTopics,
  LambdacableError,
  MessageFormatError,
  Pinger,
} from '../../../lib/core';
import { avroType } from '../../../lib/events/avro-types';
import {
  MemoryBroker,
  MemoryConnectionApi,
  MemoryConnectionStore,
  MemoryOutbox,
  MemorySchemaRegistry,
  MemorySessionCache,
} from '../../../lib/testing';

/** What `fn` threw (it must throw). */
function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('every error a caller sees is a LambdacableError', () => {
  it('refuses a broker setting that is not a positive number with a ConfigError naming it', () => {
    const error = thrown(() => resolveBrokerConfig(defaultBrokerConfig(), { historyTtl: 0 }));
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).variable).toBe('historyTtl');
  });

  it('refuses a source offset that is not a decimal string with a MessageFormatError', () => {
    expect(thrown(() => redeliveryOf('12a', undefined))).toBeInstanceOf(MessageFormatError);
  });

  it('refuses an event whose schema name is not its name, and a type registered without a topic', () => {
    const misnamed = thrown(() =>
      defineEvent({
        name: 'a.Event',
        schema: { type: 'record', name: 'b.Other', fields: [] } as never,
      }),
    );
    expect(misnamed).toBeInstanceOf(ConfigError);
    expect((misnamed as ConfigError).variable).toBe('schema.name');
    const topicless = defineEvent({ name: 'a.NoTopic', schema: { type: 'record', fields: [] } });
    const error = thrown(() => new EventTopics().register(topicless));
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).variable).toBe('topic');
  });

  it('refuses an event sender buffer that is not a positive integer', async () => {
    const sender = createEventSender({
      topics: new EventTopics(),
      registry: new MemorySchemaRegistry(),
      outbox: new MemoryOutbox({ publish: async () => {} }),
      bufferSize: 0,
    });
    const error = await sender.initialize().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).variable).toBe('bufferSize');
  });

  it('refuses an Avro long outside int64 with an AvroValueError', () => {
    const long = avroType({ type: 'record', name: 'L', fields: [{ name: 'n', type: 'long' }] });
    const error = thrown(() => long.fromString(JSON.stringify({ n: '9223372036854775808' })));
    expect(error).toBeInstanceOf(AvroValueError);
    expect((error as AvroValueError).avroType).toBe('long');
  });

  it('refuses fan-out and pinger options out of range with ConfigErrors naming them', () => {
    const parts = {
      store: new MemoryConnectionStore(),
      api: new MemoryConnectionApi(),
      sessions: new MemorySessionCache(),
    };
    const broker = (broadcaster: Broadcaster) => new MemoryBroker({ broadcaster });
    for (const [variable, options] of [
      ['concurrency', { concurrency: 0 }],
      ['retryPasses', { retryPasses: 2.5 }],
      ['retryBackoffMs', { retryBackoffMs: -1 }],
    ] as const) {
      const error = thrown(() => composeDelivery({ ...parts, ...options }, broker));
      expect(error, variable).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).variable).toBe(variable);
    }
    const welcomer = { welcome: async () => true };
    const error = thrown(() => new Pinger({ ...parts, welcomer, defaultInterval: 0 }));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error).toBeInstanceOf(LambdacableError);
  });
});
