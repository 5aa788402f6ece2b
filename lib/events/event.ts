import type avro from 'avsc';
import { ConfigError, UnknownEventTypeError } from '../kernel/errors.js';
import { avroType as toAvroType } from './avro-types.js';

/** An Avro record schema; `name` defaults to the event name. */
export interface EventRecordSchema {
  readonly type: 'record';
  readonly name?: string;
  readonly namespace?: string;
  readonly doc?: string;
  readonly fields: readonly {
    readonly name: string;
    readonly type: unknown;
    readonly default?: unknown;
    readonly doc?: string;
  }[];
}

/**
 * Options of {@link defineEvent}. `T` is the value type: declare Avro `long` fields as
 * `bigint` (they decode as `bigint`, exact over the whole int64 range; see
 * `BigIntLongType` in `avro-types.ts`).
 */
export interface EventDefinition<T> {
  /** The Avro full name of the record, e.g. `shop.OrderPlaced`. */
  readonly name: string;
  /** The Avro record schema. */
  readonly schema: EventRecordSchema;
  /** The topic the event goes to, unless {@link EventTopics} says otherwise. */
  readonly topic?: string;
  /** Derives the key (the partition) from the value when the event has none. */
  readonly key?: (value: T) => string;
  /**
   * Refuses a value that could be committed but never reach its consumers (throws, e.g.
   * `LimitExceededError`); every producer path calls it before commit.
   * @default no check
   */
  readonly check?: (value: T) => void;
}

/** An Avro-typed event type. */
export interface EventType<T = unknown> {
  /** The Avro full name. */
  readonly name: string;
  /** The avsc type, used to encode and decode. */
  readonly avroType: avro.Type;
  /** The default topic. */
  readonly topic: string | undefined;
  /** The key derived from `value` by the definition's `key` function, if any. */
  keyOf(value: T): string | undefined;
  /** Throws when `value` cannot reach this type's consumers (the definition's `check`). */
  check(value: T): void;
  /** An event of this type. */
  of(value: T): Event<T>;
}

/** An event: a typed value, optionally with a key and headers. */
export interface Event<T = unknown> {
  readonly type: EventType<T>;
  readonly value: T;
  readonly key?: string;
  readonly headers?: Readonly<Record<string, string>>;
}

/** A header attached with {@link withKey}. */
export interface EventHeader {
  readonly key: string;
  readonly value: string;
}

/**
 * Defines an Avro-typed event.
 *
 * An Avro `long` is a `bigint`: decoding always yields a `bigint`, and encoding takes a
 * `bigint` in int64 range or, for convenience, a `number` that is a safe integer
 * (`Number.isSafeInteger`). A `number` past 2^53 (which may already be rounded) or a
 * `bigint` outside int64 is refused with an `EncodeError` naming the field. Avro `int`
 * stays a `number`.
 */
export function defineEvent<T>(definition: EventDefinition<T>): EventType<T> {
  const schema = { name: definition.name, ...definition.schema } as unknown as avro.Schema;
  const avroType = toAvroType(schema);
  if (avroType.name !== definition.name) {
    throw new ConfigError(
      `event ${definition.name}: schema name must be the event name, got: ${avroType.name}`,
      { variable: 'schema.name' },
    );
  }
  const type: EventType<T> = {
    name: definition.name,
    avroType,
    topic: definition.topic,
    keyOf: (value: T) => definition.key?.(value),
    check: (value: T) => definition.check?.(value),
    of: (value: T) => ({ type, value }),
  };
  return type;
}

/** Attaches a key (the partition) and headers to an event. */
export function withKey<T>(event: Event<T>, key: string, ...headers: EventHeader[]): Event<T> {
  const merged: Record<string, string> = { ...event.headers };
  for (const h of headers) merged[h.key] = h.value;
  return { ...event, key, headers: merged };
}

/** Where an event goes and what it carries besides its payload. */
export interface EventMetadata {
  /** The event type name. */
  readonly type: string;
  readonly topic: string;
  /** The partition key; `undefined` when neither the event nor its type gives one. */
  readonly key: string | undefined;
  readonly headers: Readonly<Record<string, string>>;
}

/** The registry of event types: type → topic (flachnetz `EventTopics`). */
export class EventTopics {
  private readonly byName = new Map<string, { type: EventType<unknown>; topic: string }>();

  /** Registers `type` on `topic` (default: the type's own topic). */
  register<T>(type: EventType<T>, topic?: string): this {
    const resolved = topic ?? type.topic;
    if (!resolved) {
      throw new ConfigError(`event ${type.name} has no topic: pass one to register`, {
        variable: 'topic',
      });
    }
    this.byName.set(type.name, { type: type as unknown as EventType<unknown>, topic: resolved });
    return this;
  }

  /** The topic of `type` (a type or its name); throws {@link UnknownEventTypeError}. */
  topicForType(type: EventType<unknown> | string): string {
    return this.entry(typeof type === 'string' ? type : type.name).topic;
  }

  /** The registered type named `name`; throws {@link UnknownEventTypeError}. */
  typeOf(name: string): EventType<unknown> {
    return this.entry(name).type as unknown as EventType<unknown>;
  }

  /** Whether `name` is registered. */
  has(name: string): boolean {
    return this.byName.has(name);
  }

  /** Type, topic, key and headers of `event`; throws {@link UnknownEventTypeError}. */
  metadataOf<T>(event: Event<T>): EventMetadata {
    const { topic } = this.entry(event.type.name);
    return {
      type: event.type.name,
      topic,
      key: event.key ?? event.type.keyOf(event.value),
      headers: event.headers ?? {},
    };
  }

  /** The registered types. */
  types(): EventType<unknown>[] {
    return [...this.byName.values()].map((e) => e.type as unknown as EventType<unknown>);
  }

  /** The distinct topics. */
  topics(): string[] {
    return [...new Set([...this.byName.values()].map((e) => e.topic))];
  }

  private entry(name: string) {
    const entry = this.byName.get(name);
    if (!entry) throw new UnknownEventTypeError(name);
    return entry;
  }
}
