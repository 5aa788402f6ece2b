import type { RetryErrorInfo, RetryStrategyV2, StandardRetryToken } from '@smithy/types';

/** A seeded PRNG (mulberry32): the same seed gives the same run. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * A reproducible coin for one named decision (e.g. `['crash', key, seq, receiveCount]`):
 * the same seed and parts give the same number in [0, 1), whatever the interleaving.
 */
export function seededChance(
  seed: number,
  ...parts: readonly (string | number | bigint)[]
): number {
  let h = 0x811c9dc5 ^ seed;
  for (const c of parts.join('|')) {
    h ^= c.charCodeAt(0);
    h = Math.imul(h, 0x01000193);
  }
  return seededRandom(h >>> 0)();
}

/**
 * The SDK's retry, with a short fixed delay instead of its back-off (so injected throttling
 * costs milliseconds): up to `maxAttempts` attempts of anything but a client error.
 */
export function fastRetry(maxAttempts: number, delayMs = 5): RetryStrategyV2 {
  const token = (count: number): StandardRetryToken =>
    ({
      getRetryCount: () => count,
      getRetryDelay: () => delayMs,
      getRetryTokenCount: () => 1,
      hasRetryTokens: () => true,
    }) as unknown as StandardRetryToken;
  return {
    mode: 'standard',
    acquireInitialRetryToken: async () => token(0),
    refreshRetryTokenForRetry: async (t, info: RetryErrorInfo) => {
      const count = t.getRetryCount() + 1;
      if (count >= maxAttempts || info.errorType === 'CLIENT_ERROR') throw info.error;
      return token(count);
    },
    recordSuccess: () => {},
  } as RetryStrategyV2;
}

/** How a throttled command fails: on its first attempt only (the SDK's retry absorbs it) or on every attempt. */
export type Throttle = 'none' | 'once' | 'always';

/** The part of an SDK middleware stack used here. */
interface MiddlewareAdd {
  middlewareStack: {
    add(
      middleware: (
        next: (args: unknown) => Promise<unknown>,
        context: { commandName?: string },
      ) => (args: unknown) => Promise<unknown>,
      options: { step: 'finalizeRequest'; priority: 'low'; name: string },
    ): void;
  };
}

/**
 * Throttles commands of `client` before they reach the emulator (which never throttles):
 * `decide(commandName)` per command, inside the SDK's retry loop, with the error DynamoDB
 * and SQS send (`ThrottlingException`, a throttling error to the SDK's retry).
 */
export function injectThrottling(
  client: { middlewareStack: object },
  decide: (command: string) => Throttle,
): void {
  (client as MiddlewareAdd).middlewareStack.add(
    (next, context) => {
      const mode = decide(context.commandName ?? '');
      let attempts = 0;
      return async (args) => {
        attempts++;
        if (mode === 'always' || (mode === 'once' && attempts === 1)) {
          const error = new Error(`injected throttling of ${context.commandName}`);
          error.name = 'ThrottlingException';
          Object.assign(error, { $metadata: { httpStatusCode: 400 }, $fault: 'client' });
          throw error;
        }
        return next(args);
      };
    },
    { step: 'finalizeRequest', priority: 'low', name: 'injectedThrottling' },
  );
}

/** What {@link injectStaleReads} saw of the reads it watches. */
export interface StaleReads {
  /** Eventually consistent reads it answered with no item. */
  missed: number;
  /** Strongly consistent reads, which reach the table. */
  consistent: number;
}

/**
 * Makes `client`'s eventually consistent `GetItem`s of the items `lagging(key)` picks miss, as
 * a DynamoDB replica that has not seen a write yet answers on AWS and DynamoDB Local (always
 * consistent) never does; a `ConsistentRead` one reaches the table.
 */
export function injectStaleReads(
  client: { middlewareStack: object },
  lagging: (key: Readonly<Record<string, { S?: string }>>) => boolean,
): StaleReads {
  const seen: StaleReads = { missed: 0, consistent: 0 };
  (
    client as {
      middlewareStack: {
        add(
          middleware: (
            next: (args: { input: object }) => Promise<unknown>,
            context: { commandName?: string },
          ) => (args: { input: object }) => Promise<unknown>,
          options: { step: 'initialize'; name: string },
        ): void;
      };
    }
  ).middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as {
        Key?: Record<string, { S?: string }>;
        ConsistentRead?: boolean;
      };
      if (context.commandName !== 'GetItemCommand' || !input.Key || !lagging(input.Key)) {
        return next(args);
      }
      if (input.ConsistentRead === true) {
        seen.consistent++;
        return next(args);
      }
      seen.missed++;
      return { output: { $metadata: { httpStatusCode: 200 } } };
    },
    { step: 'initialize', name: 'injectedStaleReads' },
  );
  return seen;
}
