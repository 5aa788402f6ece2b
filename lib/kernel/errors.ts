/**
 * The one error hierarchy of lambdacable. Every error a caller can see is a
 * {@link LambdacableError}; context lives in fields, the cause is kept.
 */
export class LambdacableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'LambdacableError';
  }
}

/**
 * An AckManager was asked something its levels forbid (re-reading an id, completing an unknown
 * partition), or an ack store an offset it cannot store or read back.
 */
export class AckManagerError extends LambdacableError {
  readonly id: bigint | undefined;
  readonly partition: string | undefined;
  constructor(message: string, fields: { id?: bigint; partition?: string } = {}) {
    super(message);
    this.name = 'AckManagerError';
    this.id = fields.id;
    this.partition = fields.partition;
  }
}

/** History cannot be served from the requested position: unknown epoch, a gap, or a broker without history. */
export class HistoryError extends LambdacableError {
  readonly stream: string | undefined;
  readonly epoch: string | undefined;
  readonly offset: number | undefined;
  constructor(
    message: string,
    fields: { stream?: string; epoch?: string; offset?: number; cause?: unknown } = {},
  ) {
    super(message, { cause: fields.cause });
    this.name = 'HistoryError';
    this.stream = fields.stream;
    this.epoch = fields.epoch;
    this.offset = fields.offset;
  }
}

/** An event whose type was never registered with {@link EventTopics}. */
export class UnknownEventTypeError extends LambdacableError {
  readonly eventType: string;
  constructor(eventType: string) {
    super(`unknown event type: ${eventType}, register it with EventTopics first`);
    this.name = 'UnknownEventTypeError';
    this.eventType = eventType;
  }
}

/** Bytes that are not a Confluent-framed Avro payload this registry can read. */
export class DecodeError extends LambdacableError {
  readonly schemaId: number | undefined;
  constructor(message: string, fields: { schemaId?: number; cause?: unknown } = {}) {
    super(message, { cause: fields.cause });
    this.name = 'DecodeError';
    this.schemaId = fields.schemaId;
  }
}

/** A value that does not match its event type's Avro schema, or an event too large to carry. */
export class EncodeError extends LambdacableError {
  readonly eventType: string;
  constructor(message: string, fields: { eventType: string; cause?: unknown }) {
    super(message, { cause: fields.cause });
    this.name = 'EncodeError';
    this.eventType = fields.eventType;
  }
}

/** The registry refused a schema version that cannot read data written with the previous one. */
export class SchemaCompatibilityError extends LambdacableError {
  readonly subject: string;
  constructor(message: string, fields: { subject: string; cause?: unknown }) {
    super(message, { cause: fields.cause });
    this.name = 'SchemaCompatibilityError';
    this.subject = fields.subject;
  }
}

/** An event sender used out of order (initialized twice, used after close, no outbox for sendInTx). */
export class EventSenderError extends LambdacableError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'EventSenderError';
  }
}

/** A message that cannot be consumed: malformed body or attributes. */
export class MessageFormatError extends LambdacableError {
  readonly messageId: string | undefined;
  constructor(message: string, fields: { messageId?: string; cause?: unknown } = {}) {
    super(message, { cause: fields.cause });
    this.name = 'MessageFormatError';
    this.messageId = fields.messageId;
  }
}

/** A call to an AWS service failed after the SDK's own retries. */
export class AwsResourceError extends LambdacableError {
  readonly resource: string;
  readonly ids: readonly string[];
  constructor(
    message: string,
    fields: { resource: string; ids?: readonly string[]; cause?: unknown },
  ) {
    super(message, { cause: fields.cause });
    this.name = 'AwsResourceError';
    this.resource = fields.resource;
    this.ids = fields.ids ?? [];
  }
}

/**
 * A call the service throttled (HTTP 429, `LimitExceededException`) and that still was after
 * the adapter's own retries. Nothing was done: a later try cannot duplicate it. API Gateway
 * answers a `PostToConnection` so also when the client's buffer is full.
 */
export class ThrottledError extends AwsResourceError {
  constructor(
    message: string,
    fields: { resource: string; ids?: readonly string[]; cause?: unknown },
  ) {
    super(message, fields);
    this.name = 'ThrottledError';
  }
}

/** A connect token (or its absence) that does not identify a client: malformed, forged, expired. */
export class UnauthorizedError extends LambdacableError {
  /** What is wrong: `missing`, `malformed`, `signature`, `expired` or `claims`. */
  readonly reason: 'missing' | 'malformed' | 'signature' | 'expired' | 'claims';
  constructor(
    message: string,
    fields: {
      reason: 'missing' | 'malformed' | 'signature' | 'expired' | 'claims';
      cause?: unknown;
    },
  ) {
    super(message, { cause: fields.cause });
    this.name = 'UnauthorizedError';
    this.reason = fields.reason;
  }
}

/** A client frame the gateway refuses: oversize, not JSON, unknown command or identifier, forbidden action. */
export class ProtocolError extends LambdacableError {
  readonly connectionId: string;
  readonly command: string | undefined;
  readonly identifier: string | undefined;
  constructor(
    message: string,
    fields: { connectionId: string; command?: string; identifier?: string; cause?: unknown },
  ) {
    super(message, { cause: fields.cause });
    this.name = 'ProtocolError';
    this.connectionId = fields.connectionId;
    this.command = fields.command;
    this.identifier = fields.identifier;
  }
}

/**
 * A setting with a value that cannot be used (an environment variable, a constructor option,
 * an event definition); names the setting and what was expected.
 */
export class ConfigError extends LambdacableError {
  /** The variable or option at fault. */
  readonly variable: string;
  constructor(message: string, fields: { variable: string; cause?: unknown }) {
    super(message, { cause: fields.cause });
    this.name = 'ConfigError';
    this.variable = fields.variable;
  }
}

/**
 * A value over one of the documented limits (`lib/kernel/limits.ts`): a key too long for its
 * table (`kind: 'key'`), or a payload too large to carry (`kind: 'payload'`).
 */
export class LimitExceededError extends LambdacableError {
  /** What is too large, e.g. `stream name`. */
  readonly what: string;
  /** Its size in bytes. */
  readonly bytes: number;
  /** The limit in bytes. */
  readonly limit: number;
  readonly kind: 'key' | 'payload';
  constructor(
    message: string,
    fields: { what: string; bytes: number; limit: number; kind: 'key' | 'payload' },
  ) {
    super(message);
    this.name = 'LimitExceededError';
    this.what = fields.what;
    this.bytes = fields.bytes;
    this.limit = fields.limit;
    this.kind = fields.kind;
  }
}

/**
 * An `Idempotency-Key` sent again with another request body (HTTP 422): the key names the
 * first body's events, some of which may be written already.
 */
export class IdempotencyKeyReusedError extends LambdacableError {
  /** The key as scoped: the caller, if one is named, `#` and the header. */
  readonly scope: string;
  constructor(fields: { scope: string }) {
    super('Idempotency-Key was used with a different body');
    this.name = 'IdempotencyKeyReusedError';
    this.scope = fields.scope;
  }
}

/** A value an Avro type cannot represent (a `long` outside int64, say). */
export class AvroValueError extends LambdacableError {
  /** The Avro type that refused the value. */
  readonly avroType: string;
  constructor(message: string, fields: { avroType: string }) {
    super(message);
    this.name = 'AvroValueError';
    this.avroType = fields.avroType;
  }
}

/** The message of anything thrown: an `Error`'s message, else the value as a string. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
