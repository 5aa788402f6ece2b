import { describe, expect, it } from 'vitest';
import { FRAMES_INTEGRATION, FRAMES_ROUTE, WEBSOCKET_API } from '../../../infra/deploy/names';
import {
  type CompiledTemplate,
  deployFramesRoute,
} from '../../../infra/deploy/websocket/deployment';
import { framesResources } from '../../../infra/deploy/websocket/frames';

/** A template as the Serverless Framework compiles it, with the frames resources merged in. */
function compiled(): CompiledTemplate {
  return {
    Resources: {
      [WEBSOCKET_API]: { Type: 'AWS::ApiGatewayV2::Api', Properties: {} },
      WebsocketsDeploymentAbc: {
        Type: 'AWS::ApiGatewayV2::Deployment',
        DependsOn: ['SconnectWebsocketsRoute'],
        Properties: { ApiId: { Ref: WEBSOCKET_API } },
      },
      WebsocketsDeploymentStage: {
        Type: 'AWS::ApiGatewayV2::Stage',
        Properties: { DeploymentId: { Ref: 'WebsocketsDeploymentAbc' } },
      },
      HttpApiDeployment: {
        Type: 'AWS::ApiGatewayV2::Deployment',
        Properties: { ApiId: { Ref: 'HttpApi' } },
      },
      ...framesResources('lambdacable-test').Resources,
    },
    Outputs: { Deployed: { Value: { Ref: 'WebsocketsDeploymentAbc' } } },
  };
}

describe('deployFramesRoute: the $default route of the resources section is deployed with the stage', () => {
  it('makes the WebSocket deployment depend on the route and renames it, rewriting every Ref', () => {
    const t = compiled();
    const id = deployFramesRoute(t)!;
    expect(id).not.toBe('WebsocketsDeploymentAbc');
    expect(t.Resources.WebsocketsDeploymentAbc).toBeUndefined();
    expect(t.Resources[id]!.DependsOn).toEqual(['SconnectWebsocketsRoute', FRAMES_ROUTE]);
    expect(t.Resources.WebsocketsDeploymentStage!.Properties.DeploymentId).toEqual({ Ref: id });
    expect(t.Outputs!.Deployed).toEqual({ Value: { Ref: id } });
    // The HTTP API's deployment is not the WebSocket API's.
    expect(t.Resources.HttpApiDeployment!.DependsOn).toBeUndefined();
  });

  it('gives a new deployment id when the route or its integration changes, the same one otherwise', () => {
    const same = deployFramesRoute(compiled());
    expect(deployFramesRoute(compiled())).toBe(same);
    const changed = compiled();
    const props = changed.Resources[FRAMES_INTEGRATION]!.Properties;
    props.RequestTemplates = { $default: 'Action=SendMessage&MessageBody=x' };
    expect(deployFramesRoute(changed)).not.toBe(same);
  });

  it('does nothing without the route, and refuses a template without one WebSocket deployment', () => {
    const none: CompiledTemplate = { Resources: {} };
    expect(deployFramesRoute(none)).toBeUndefined();
    const t = compiled();
    delete t.Resources.WebsocketsDeploymentAbc;
    expect(() => deployFramesRoute(t)).toThrow(/expected one deployment of WebsocketsApi/);
  });
});
