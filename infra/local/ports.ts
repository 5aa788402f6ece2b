/**
 * The ports of the local stack: where every local service listens (127.0.0.1 only), the ports
 * the stack is asked for or reads from its variables, and free ones picked for it.
 */

import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { LambdacableError } from '../../lib/core';

/** Loopback address every local service binds to. Nothing listens on other interfaces. */
export const LOCAL_HOST = '127.0.0.1';

/**
 * Returns a TCP port that is free on 127.0.0.1 right now (it may be taken again later). On
 * Linux it is drawn from below the kernel's ephemeral range, so no outgoing connection of any
 * process on the machine is handed it meanwhile (one did take a port the OS had just picked,
 * between this check and serverless-offline's listen). A port is handed out once per process.
 */
export async function freePort(): Promise<number> {
  const below = ephemeralLow();
  if (below !== undefined && below - FREE_PORT_FLOOR >= 1_000) {
    for (let attempt = 0; attempt < 50; attempt++) {
      const port = FREE_PORT_FLOOR + Math.floor(Math.random() * (below - FREE_PORT_FLOOR));
      if (!handedOut.has(port) && (await listenOnce(port)) !== undefined) {
        handedOut.add(port);
        return port;
      }
    }
  }
  for (;;) {
    const port = await listenOnce(0);
    if (port === undefined) throw new Error('freePort: the OS picked no port');
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
}

/** The lowest port {@link freePort} draws from: above the ones services conventionally use. */
const FREE_PORT_FLOOR = 20_000;
const handedOut = new Set<number>();
let ephemeral: { low: number | undefined } | undefined;

/** The first port of Linux's ephemeral range (read once), or undefined where it cannot be read. */
function ephemeralLow(): number | undefined {
  if (!ephemeral) {
    let low: number | undefined;
    try {
      const range = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8');
      low = Number(range.trim().split(/\s+/)[0]);
      if (!Number.isInteger(low) || low <= 0) low = undefined;
    } catch {
      low = undefined;
    }
    ephemeral = { low };
  }
  return ephemeral.low;
}

/** Listens on `port` of 127.0.0.1 (0: one the OS picks) and closes: the port, or undefined if taken. */
function listenOnce(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(undefined));
    server.listen({ host: LOCAL_HOST, port, exclusive: true }, () => {
      const address = server.address();
      const bound = typeof address === 'object' && address ? address.port : undefined;
      server.close(() => resolve(bound));
    });
  });
}

/** The ports of the stack's services; 0 means any free one. */
export interface StackPortOptions {
  /** WebSocket port. @default LAMBDACABLE_WS_PORT or 3001 */
  readonly wsPort?: number;
  /** HTTP port (broadcast API). @default LAMBDACABLE_HTTP_PORT or 3000 */
  readonly httpPort?: number;
  /** serverless-offline's Lambda invoke port. @default LAMBDACABLE_LAMBDA_PORT or 3002 */
  readonly lambdaPort?: number;
  /** DynamoDB Local's port. @default LAMBDACABLE_DYNAMODB_PORT or 8000 */
  readonly dynamodbPort?: number;
  /** fauxqs' port. @default LAMBDACABLE_SQS_PORT or 9324 */
  readonly sqsPort?: number;
}

/** serverless-offline's three ports. */
export interface OfflinePorts {
  readonly ws: number;
  readonly http: number;
  readonly lambda: number;
}

/** The variable that sets each of serverless-offline's ports. */
export const PORT_VARIABLES: Readonly<Record<keyof OfflinePorts, string>> = {
  ws: 'LAMBDACABLE_WS_PORT',
  http: 'LAMBDACABLE_HTTP_PORT',
  lambda: 'LAMBDACABLE_LAMBDA_PORT',
};

/**
 * Every port of the stack, each as given, else from its variable in `env`, else the
 * documented one; all read before anything starts, so a bad one leaves nothing running.
 */
export function stackPorts(
  options: StackPortOptions,
  env: Readonly<Record<string, string | undefined>>,
): { offline: OfflinePorts; dynamodb: number; sqs: number } {
  const port = (value: number | undefined, name: string, fallback: number): number => {
    const chosen = value ?? (env[name] ? Number(env[name]) : fallback);
    if (!Number.isInteger(chosen) || chosen < 0 || chosen > 65_535) {
      throw new LambdacableError(
        `${name}: ${value ?? env[name]} is not a port (0 to 65535; 0 picks a free one)`,
      );
    }
    return chosen;
  };
  return {
    offline: {
      ws: port(options.wsPort, PORT_VARIABLES.ws, 3001),
      http: port(options.httpPort, PORT_VARIABLES.http, 3000),
      lambda: port(options.lambdaPort, PORT_VARIABLES.lambda, 3002),
    },
    dynamodb: port(options.dynamodbPort, 'LAMBDACABLE_DYNAMODB_PORT', 8000),
    sqs: port(options.sqsPort, 'LAMBDACABLE_SQS_PORT', 9324),
  };
}

/**
 * Any free port for every service, for tests and benchmarks that must not clash with
 * `npm start` or with each other: the emulators listen on one the OS picks, serverless-offline
 * on ones picked for it (again, should another process take one first).
 */
export function freeStackPorts(): Required<StackPortOptions> {
  return { wsPort: 0, httpPort: 0, lambdaPort: 0, dynamodbPort: 0, sqsPort: 0 };
}

/** A port serverless-offline was to listen on is in use. */
export class PortInUseError extends LambdacableError {
  readonly port: number;
  constructor(port: number, message: string) {
    super(message);
    this.name = 'PortInUseError';
    this.port = port;
  }
}
