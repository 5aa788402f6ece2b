/**
 * Puts the `$default` route of infra/deploy/websocket/frames.ts into the WebSocket stage's
 * deployment. The Serverless Framework builds that deployment from the routes of its own
 * `websocket` events: it depends on them only, and its logical id is a hash of them. A route of
 * the `resources` section could then be created after the deployment (and be missing from the
 * stage), and a change to it would not make a new deployment. So, once the resources are
 * merged into the template (serverless.yml's local plugin websocket/deployment-plugin.cjs), the
 * deployment also depends on the route, and its logical id also hashes the route and its
 * integration.
 */

import { createHash } from 'node:crypto';
import { LambdacableError } from '../../../lib/kernel/errors';
import { FRAMES_INTEGRATION, FRAMES_ROUTE, WEBSOCKET_API } from '../names';
import type { Json, Resource } from '../template/types';

/** A compiled template, as far as this module reads it. */
export interface CompiledTemplate {
  Resources: Record<string, Resource>;
  Outputs?: Record<string, Json>;
}

/**
 * Makes the WebSocket API's deployment depend on the frames route and renames it with a hash of
 * the route and its integration, rewriting every `Ref` to it. Returns the new logical id, or
 * undefined when the template has no frames route (nothing to do). Throws when it has the
 * route but not exactly one deployment of the WebSocket API.
 */
export function deployFramesRoute(template: CompiledTemplate): string | undefined {
  const resources = template.Resources;
  const route = resources[FRAMES_ROUTE];
  if (!route) return undefined;
  const deployments = Object.keys(resources).filter((id) => {
    const r = resources[id]!;
    const api = r.Properties?.ApiId as { Ref?: string } | undefined;
    return r.Type === 'AWS::ApiGatewayV2::Deployment' && api?.Ref === WEBSOCKET_API;
  });
  if (deployments.length !== 1) {
    throw new LambdacableError(
      `lambdacable: expected one deployment of ${WEBSOCKET_API} to add ${FRAMES_ROUTE} to, ` +
        `found ${deployments.length}`,
    );
  }
  const oldId = deployments[0]!;
  const hash = createHash('sha256')
    .update(oldId)
    .update(JSON.stringify(route))
    .update(JSON.stringify(resources[FRAMES_INTEGRATION] ?? null))
    .digest('hex')
    .slice(0, 16);
  const newId = `${oldId.replace(/[^A-Za-z0-9]/g, '').slice(0, 200)}Frames${hash}`;
  const deployment = resources[oldId]!;
  delete resources[oldId];
  resources[newId] = {
    ...deployment,
    DependsOn: [...new Set([...(deployment.DependsOn ?? []), FRAMES_ROUTE])],
  };
  template.Resources = rewriteRefs(resources, oldId, newId) as Record<string, Resource>;
  if (template.Outputs) {
    template.Outputs = rewriteRefs(template.Outputs, oldId, newId) as Record<string, Json>;
  }
  return newId;
}

/** `value` with every `{ Ref: from }` (and `DependsOn` entry `from`) now naming `to`. */
function rewriteRefs(value: unknown, from: string, to: string): unknown {
  if (Array.isArray(value)) return value.map((v) => (v === from ? to : rewriteRefs(v, from, to)));
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    if (key === 'Ref' && v === from) out[key] = to;
    else if (key === 'DependsOn' && v === from) out[key] = to;
    else out[key] = rewriteRefs(v, from, to);
  }
  return out;
}
