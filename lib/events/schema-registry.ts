import type avro from 'avsc';
import { SchemaCompatibilityError } from '../kernel/errors.js';
import { avroType } from './avro-types.js';

/** A schema registry: subject → versions, global ids (Confluent semantics). */
export interface SchemaRegistry {
  /** Registers `schema` under `subject` and returns its id; identical schemas get the same id. */
  register(subject: string, schema: avro.Schema): Promise<number>;
  /** The schema with `id`, or `undefined` when a read that sees every registration misses it. */
  getById(id: number): Promise<avro.Schema | undefined>;
}

/** The canonical JSON of a schema: equal for equal schemas, whatever their spelling. */
export function canonicalSchema(schema: avro.Schema): string {
  return JSON.stringify(avroType(schema).schema({ exportAttrs: true }));
}

/**
 * BACKWARD compatibility: a reader on the new schema must read data written with the
 * previous one. Throws {@link SchemaCompatibilityError} otherwise.
 */
export function assertBackwardCompatible(
  subject: string,
  previous: avro.Schema,
  next: avro.Schema,
): void {
  try {
    avroType(next).createResolver(avroType(previous));
  } catch (cause) {
    throw new SchemaCompatibilityError(
      `schema for ${subject} is not backward compatible with the previous version: ${(cause as Error).message}`,
      { subject, cause },
    );
  }
}
