/**
 * Stage throttling of the public entry points (`$connect`, `$default`, `POST /_broadcast`):
 * a flood from one client or a leaked key meets API Gateway's limit before it costs a Lambda
 * invocation. Applied to the stages the Serverless Framework creates, as `resources.extensions`.
 */

import { ConfigError } from '../../lib/kernel/errors';

/** Steady requests per second and burst of one route. */
export interface RouteThrottle {
  readonly rate: number;
  readonly burst: number;
}

/** The throttles of the three entry points. */
export interface ThrottleSettings {
  /** New WebSocket connections (`$connect`), per second for the stage. */
  readonly connect: RouteThrottle;
  /** Client frames (`$default`), per second for the stage. */
  readonly frames: RouteThrottle;
  /** `POST /_broadcast` requests, per second. */
  readonly broadcast: RouteThrottle;
}

/**
 * The defaults: `$connect` at API Gateway's own 500 new connections per second; frames well
 * inside the account's 10,000 requests per second; broadcasts at 500 requests per second.
 */
export const DEFAULT_THROTTLES: ThrottleSettings = {
  connect: { rate: 500, burst: 1000 },
  frames: { rate: 5000, burst: 5000 },
  broadcast: { rate: 500, burst: 1000 },
};

/** The deploy variables of {@link ThrottleSettings}. */
export const THROTTLE_VARIABLES = {
  connect: { rate: 'LAMBDACABLE_CONNECT_RATE_LIMIT', burst: 'LAMBDACABLE_CONNECT_BURST_LIMIT' },
  frames: { rate: 'LAMBDACABLE_FRAME_RATE_LIMIT', burst: 'LAMBDACABLE_FRAME_BURST_LIMIT' },
  broadcast: {
    rate: 'LAMBDACABLE_BROADCAST_RATE_LIMIT',
    burst: 'LAMBDACABLE_BROADCAST_BURST_LIMIT',
  },
} as const;

/** Settings from deploy variables (empty: the default); a value that is no positive integer fails. */
export function throttleSettings(
  env: Readonly<Record<string, string | undefined>>,
): ThrottleSettings {
  const read = (route: keyof ThrottleSettings): RouteThrottle => {
    const value = (part: keyof RouteThrottle): number => {
      const name = THROTTLE_VARIABLES[route][part];
      const raw = env[name];
      if (raw === undefined || raw === '') return DEFAULT_THROTTLES[route][part];
      const n = Number(raw);
      if (!Number.isInteger(n) || n <= 0) {
        throw new ConfigError(`${name}: ${JSON.stringify(raw)} is not a positive integer`, {
          variable: name,
        });
      }
      return n;
    };
    return { rate: value('rate'), burst: value('burst') };
  };
  return { connect: read('connect'), frames: read('frames'), broadcast: read('broadcast') };
}

const route = (t: RouteThrottle) => ({
  ThrottlingRateLimit: t.rate,
  ThrottlingBurstLimit: t.burst,
});

/**
 * `resources.extensions` for the stages serverless creates: the WebSocket stage's `$connect`
 * and `$default` routes, and the HTTP API's default route (its one route, `POST /_broadcast`).
 */
export function stageExtensions(settings: ThrottleSettings) {
  return {
    WebsocketsDeploymentStage: {
      Properties: {
        RouteSettings: {
          $connect: route(settings.connect),
          $default: route(settings.frames),
        },
      },
    },
    HttpApiStage: {
      Properties: {
        DefaultRouteSettings: { DetailedMetricsEnabled: false, ...route(settings.broadcast) },
      },
    },
  };
}
