import type avro from 'avsc';
import {
  assertBackwardCompatible,
  canonicalSchema,
  type SchemaRegistry,
} from '../../events/schema-registry.js';

/** An in-memory {@link SchemaRegistry}. */
export class MemorySchemaRegistry implements SchemaRegistry {
  private readonly idsByCanonical = new Map<string, number>();
  private readonly schemasById = new Map<number, avro.Schema>();
  private readonly versions = new Map<string, string[]>();

  async register(subject: string, schema: avro.Schema): Promise<number> {
    const canonical = canonicalSchema(schema);
    const versions = this.versions.get(subject) ?? [];
    const existing = this.idsByCanonical.get(canonical);
    if (existing !== undefined && versions.includes(canonical)) return existing;
    const latest = versions[versions.length - 1];
    if (latest !== undefined) assertBackwardCompatible(subject, JSON.parse(latest), schema);
    const id = existing ?? this.idsByCanonical.size + 1;
    this.idsByCanonical.set(canonical, id);
    this.schemasById.set(id, JSON.parse(canonical));
    versions.push(canonical);
    this.versions.set(subject, versions);
    return id;
  }

  async getById(id: number): Promise<avro.Schema | undefined> {
    return this.schemasById.get(id);
  }
}
