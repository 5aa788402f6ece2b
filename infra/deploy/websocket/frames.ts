/**
 * The ordered path of client frames: the WebSocket API's `$default` route is an SQS
 * integration that sends every frame to a FIFO queue, grouped by connection, and `wsDefault`
 * consumes that queue. One connection's frames then take effect one after another, in the
 * order API Gateway forwarded them (docs/protocol.md, "Order"); different connections'
 * frames run at the same time.
 */

import { DEFAULT_FUNCTION_TIMEOUT } from '../definitions';
import {
  FRAMES,
  FRAMES_INTEGRATION,
  FRAMES_ROUTE,
  FRAMES_SENDER_ROLE,
  framesQueueNames,
  queueLogicalIds,
  WEBSOCKET_API,
} from '../names';
import { fifoQueuePair } from '../template/storage';
import type { Json, Resource } from '../template/types';
import { FRAMES_REQUEST_TEMPLATE } from './frames-template';

/**
 * How often a batch of frames is received before it is dead-lettered: only an invocation
 * that fails outright (a timeout, a crash) returns frames, since the gateway answers every
 * refused frame itself.
 */
export const FRAMES_MAX_RECEIVE_COUNT = 3;

/** What `wsDefault`'s event source mapping takes: up to 10 frames, no batching window. */
export const FRAMES_BATCH_SIZE = 10;

/**
 * The frames queue and its DLQ, the role API Gateway sends with (`sqs:SendMessage` on that
 * queue only), the `$default` route and its SQS integration. The route is deployed with the
 * stage's deployment by infra/deploy/websocket/deployment.ts.
 */
export function framesResources(prefix: string): {
  Resources: Record<string, Resource>;
  Outputs: Record<string, Json>;
} {
  const names = framesQueueNames(prefix);
  const ids = queueLogicalIds(FRAMES);
  return {
    Resources: {
      // The deduplication id is the frame's request id.
      ...fifoQueuePair(names, ids, {
        visibilityTimeout: 6 * DEFAULT_FUNCTION_TIMEOUT,
        maxReceiveCount: FRAMES_MAX_RECEIVE_COUNT,
      }),
      [FRAMES_SENDER_ROLE]: {
        Type: 'AWS::IAM::Role',
        Properties: {
          AssumeRolePolicyDocument: {
            Version: '2012-10-17',
            Statement: [
              {
                Effect: 'Allow',
                Principal: { Service: 'apigateway.amazonaws.com' },
                Action: 'sts:AssumeRole',
              },
            ],
          },
          Policies: [
            {
              PolicyName: 'send-frames',
              PolicyDocument: {
                Version: '2012-10-17',
                Statement: [
                  {
                    Effect: 'Allow',
                    Action: ['sqs:SendMessage'],
                    Resource: [{ 'Fn::GetAtt': [ids.queue, 'Arn'] }],
                  },
                ],
              },
            },
          ],
        },
      },
      [FRAMES_INTEGRATION]: {
        Type: 'AWS::ApiGatewayV2::Integration',
        Properties: {
          ApiId: { Ref: WEBSOCKET_API },
          IntegrationType: 'AWS',
          IntegrationMethod: 'POST',
          IntegrationUri: {
            'Fn::Sub': [
              `arn:\${AWS::Partition}:apigateway:\${AWS::Region}:sqs:path/\${AWS::AccountId}/\${Queue}`,
              { Queue: { 'Fn::GetAtt': [ids.queue, 'QueueName'] } },
            ],
          },
          CredentialsArn: { 'Fn::GetAtt': [FRAMES_SENDER_ROLE, 'Arn'] },
          PassthroughBehavior: 'NEVER',
          RequestParameters: {
            'integration.request.header.Content-Type': "'application/x-www-form-urlencoded'",
          },
          RequestTemplates: { $default: FRAMES_REQUEST_TEMPLATE },
          TemplateSelectionExpression: '\\$default',
        },
      },
      [FRAMES_ROUTE]: {
        Type: 'AWS::ApiGatewayV2::Route',
        Properties: {
          ApiId: { Ref: WEBSOCKET_API },
          RouteKey: '$default',
          AuthorizationType: 'NONE',
          Target: { 'Fn::Join': ['/', ['integrations', { Ref: FRAMES_INTEGRATION }]] },
        },
      },
    },
    Outputs: { [`${ids.queue}Url`]: { Value: { Ref: ids.queue } } },
  };
}
