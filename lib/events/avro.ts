import type avro from 'avsc';
import { DecodeError, EncodeError } from '../kernel/errors.js';
import { avroType } from './avro-types.js';
import type { EventType } from './event.js';
import type { SchemaRegistry } from './schema-registry.js';

const MAGIC = 0x00;
const HEADER = 5;

/** Confluent framing: `0x00`, 4-byte big-endian schema id, Avro binary. */
export function frame(schemaId: number, body: Uint8Array): Uint8Array {
  const out = new Uint8Array(HEADER + body.length);
  out[0] = MAGIC;
  new DataView(out.buffer).setUint32(1, schemaId, false);
  out.set(body, HEADER);
  return out;
}

/** Splits a Confluent-framed payload; throws {@link DecodeError} for anything else. */
export function unframe(bytes: Uint8Array): { schemaId: number; body: Uint8Array } {
  if (bytes.length < HEADER) {
    throw new DecodeError(`payload too short: ${bytes.length} bytes, expected at least ${HEADER}`);
  }
  if (bytes[0] !== MAGIC) {
    throw new DecodeError(`unknown magic byte: ${bytes[0]}, expected 0`);
  }
  const schemaId = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(
    1,
    false,
  );
  return { schemaId, body: bytes.subarray(HEADER) };
}

/**
 * Encodes events with the schema ids of a {@link SchemaRegistry} and decodes any
 * framed payload by resolving its writer schema to the reader's. Avro `long` values
 * decode as `bigint` whatever wrote them (see `defineEvent`).
 */
export class AvroCodec {
  private readonly ids = new Map<string, number>();
  private readonly writers = new Map<number, Promise<avro.Type>>();
  private readonly resolvers = new WeakMap<avro.Type, Map<number, avro.Resolver>>();

  constructor(private readonly registry: SchemaRegistry) {}

  /** Registers `type`'s schema (subject = type name) and remembers its id. */
  async register<T>(type: EventType<T>): Promise<number> {
    const known = this.ids.get(type.name);
    if (known !== undefined) return known;
    const id = await this.registry.register(
      type.name,
      type.avroType.schema({ exportAttrs: true }) as avro.Schema,
    );
    this.ids.set(type.name, id);
    return id;
  }

  /** Encodes with a registered type's id, synchronously; throws {@link EncodeError}. */
  encodeSync<T>(type: EventType<T>, value: T): Uint8Array {
    const id = this.ids.get(type.name);
    if (id === undefined) {
      throw new EncodeError(`event type ${type.name} has no schema id: register it first`, {
        eventType: type.name,
      });
    }
    return frame(id, this.toAvro(type, value));
  }

  /** Encodes `value`, registering its type if needed; throws {@link EncodeError}. */
  async encode<T>(type: EventType<T>, value: T): Promise<Uint8Array> {
    const id = await this.register(type);
    return frame(id, this.toAvro(type, value));
  }

  /** Decodes a framed payload as `reader` (default: the writer schema); throws {@link DecodeError}. */
  async decode<T = unknown>(bytes: Uint8Array, reader?: EventType<T>): Promise<T> {
    const { schemaId, body } = unframe(bytes);
    const writer = await this.writerType(schemaId);
    const buffer = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    try {
      if (!reader) return writer.fromBuffer(buffer) as T;
      return reader.avroType.fromBuffer(buffer, this.resolver(schemaId, writer, reader)) as T;
    } catch (cause) {
      if (cause instanceof DecodeError) throw cause;
      throw new DecodeError(
        `undecodable payload for schema ${schemaId}: ${(cause as Error).message}`,
        {
          schemaId,
          cause,
        },
      );
    }
  }

  private toAvro<T>(type: EventType<T>, value: T): Buffer {
    const errors: string[] = [];
    const valid = type.avroType.isValid(value, {
      errorHook: (path) => errors.push(path.join('.') || '(root)'),
    });
    if (!valid) {
      throw new EncodeError(`invalid ${type.name}: bad field(s) ${errors.join(', ')}`, {
        eventType: type.name,
      });
    }
    return type.avroType.toBuffer(value);
  }

  private writerType(schemaId: number): Promise<avro.Type> {
    let writer = this.writers.get(schemaId);
    if (!writer) {
      writer = this.registry.getById(schemaId).then((schema) => {
        if (schema === undefined) {
          throw new DecodeError(`unknown schema id: ${schemaId}`, { schemaId });
        }
        return avroType(schema);
      });
      // A failed lookup is not cached: the schema may be registered later.
      writer.catch(() => this.writers.delete(schemaId));
      this.writers.set(schemaId, writer);
    }
    return writer;
  }

  private resolver(schemaId: number, writer: avro.Type, reader: EventType<unknown>): avro.Resolver {
    // Per reader type, not per name: two versions of one event (same name) need their own.
    let byId = this.resolvers.get(reader.avroType);
    if (!byId) {
      byId = new Map();
      this.resolvers.set(reader.avroType, byId);
    }
    let resolver = byId.get(schemaId);
    if (!resolver) {
      try {
        resolver = reader.avroType.createResolver(writer);
      } catch (cause) {
        throw new DecodeError(
          `schema ${schemaId} cannot be read as ${reader.name}: ${(cause as Error).message}`,
          { schemaId, cause },
        );
      }
      byId.set(schemaId, resolver);
    }
    return resolver;
  }
}
