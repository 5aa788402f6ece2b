/**
 * Records every AWS call a function makes, for the IAM sufficiency test: with
 * `LAMBDACABLE_AWS_CALL_LOG` set (a file path, set by `npm start`'s tests only), each SDK
 * client appends one JSON line per call: the function, the service, the operation and the
 * input fields that name resources. Off (no middleware) when the variable is unset.
 */
import { openSync, writeSync } from 'node:fs';

/** One recorded call. */
export interface RecordedCall {
  /** The function's name (`AWS_LAMBDA_FUNCTION_NAME`), e.g. `lambdacable-local-wsConnect`. */
  readonly function: string;
  /** The SDK client, e.g. `DynamoDBClient`. */
  readonly client: string;
  /** The command without `Command`, e.g. `TransactWriteItems`. */
  readonly operation: string;
  /** The endpoint the client was pointed at, for API Gateway's management API. */
  readonly endpoint?: string;
  /** The input's resource-naming fields. */
  readonly input: Record<string, unknown>;
}

/** Input fields that name resources; items and values are not recorded. */
const RESOURCE_FIELDS = ['TableName', 'IndexName', 'QueueUrl', 'ConnectionId', 'FunctionName'];

interface MiddlewareClient {
  readonly config: {
    endpoint?: () => Promise<{ hostname: string; port?: number; protocol: string }>;
  };
  readonly middlewareStack: {
    add(
      middleware: (
        next: (args: { input: object }) => Promise<unknown>,
        context: { clientName?: string; commandName?: string },
      ) => (args: { input: object }) => Promise<unknown>,
      options: { step: 'initialize'; name: string },
    ): void;
  };
}

/** Adds the recorder to a client when `file` is set; returns the client. */
export function recordAwsCalls<C>(client: C, file: string | undefined, fn: string): C {
  if (!file) return client;
  const c = client as unknown as MiddlewareClient;
  // A client's endpoint is fixed: resolved on its first call, not on every one.
  let endpoint: Promise<string | undefined> | undefined;
  const endpointOf = async () => {
    const e = c.config.endpoint ? await c.config.endpoint() : undefined;
    return e ? `${e.protocol}//${e.hostname}:${e.port ?? ''}` : undefined;
  };
  c.middlewareStack.add(
    (next, context) => async (args) => {
      endpoint ??= endpointOf();
      const url = await endpoint;
      const call: RecordedCall = {
        function: fn,
        client: context.clientName ?? 'unknown',
        operation: (context.commandName ?? 'unknown').replace(/Command$/, ''),
        ...(url ? { endpoint: url } : {}),
        input: resourceFields(args.input),
      };
      // Synchronous: a call recorded just before the process ends is not lost. One descriptor
      // per file, opened for appending, so a call costs one write (a fan-out records one per post).
      writeSync(descriptorOf(file), `${JSON.stringify(call)}\n`);
      return next(args);
    },
    { step: 'initialize', name: 'lambdacableCallLog' },
  );
  return client;
}

const descriptors = new Map<string, number>();

function descriptorOf(file: string): number {
  let fd = descriptors.get(file);
  if (fd === undefined) {
    fd = openSync(file, 'a');
    descriptors.set(file, fd);
  }
  return fd;
}

function resourceFields(input: object): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const record = input as Record<string, unknown>;
  for (const field of RESOURCE_FIELDS) if (field in record) out[field] = record[field];
  // Batches and transactions name a table per item (IAM authorises each item's action).
  if (record.RequestItems && typeof record.RequestItems === 'object') {
    out.RequestItems = Object.keys(record.RequestItems);
  }
  if (Array.isArray(record.TransactItems)) {
    out.TransactItems = record.TransactItems.map((item: Record<string, { TableName?: string }>) =>
      Object.fromEntries(Object.entries(item).map(([kind, op]) => [kind, op.TableName])),
    );
  }
  return out;
}
