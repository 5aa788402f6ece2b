import { describe, expect, it } from 'vitest';
import {
  defaultSecretParameters,
  isOfflineCommand,
  secretEnvironment,
  secretParameters,
} from '../../infra/deploy/secrets';
import { cloudFormation } from '../../infra/deploy/template/cloudformation';
import { functionSecrets } from '../../infra/deploy/template/roles';

// biome-ignore lint/suspicious/noExplicitAny: CloudFormation JSON.
type Json = any;

const statementsOf = (resources: Record<string, Json>, role: string): Json[] =>
  resources[role].Properties.Policies[0].PolicyDocument.Statement;

describe('the secrets of a deploy (infra/deploy/secrets.ts)', () => {
  it('names a parameter per secret by default: /lambdacable/<stage>/…', () => {
    expect(defaultSecretParameters('prod')).toEqual({
      LAMBDACABLE_JWT_SECRET: '/lambdacable/prod/jwt-secret',
      LAMBDACABLE_JWT_SECRET_PREVIOUS: '/lambdacable/prod/jwt-secret-previous',
      LAMBDACABLE_STREAMS_SECRET: '/lambdacable/prod/streams-secret',
      LAMBDACABLE_STREAMS_SECRET_PREVIOUS: '/lambdacable/prod/streams-secret-previous',
      LAMBDACABLE_BROADCAST_KEY: '/lambdacable/prod/broadcast-key',
      LAMBDACABLE_BROADCAST_KEY_PREVIOUS: '/lambdacable/prod/broadcast-key-previous',
    });
  });

  it('reads custom.secrets, leaves out an empty one and refuses a key it does not know', () => {
    expect(
      secretParameters({ jwt: '/a', jwtPrevious: '', broadcastKey: 'secretsmanager:b' }),
    ).toEqual({ LAMBDACABLE_JWT_SECRET: '/a', LAMBDACABLE_BROADCAST_KEY: 'secretsmanager:b' });
    expect(() => secretParameters({ jwtSecret: '/a' })).toThrow(
      /custom\.secrets\.jwtSecret is not a secret/,
    );
  });

  it('gives a deployed function its parameter names, and only serverless offline the values', () => {
    const parameters = defaultSecretParameters('dev');
    const variables = functionSecrets('httpBroadcast');
    expect(variables).toEqual(['LAMBDACABLE_BROADCAST_KEY', 'LAMBDACABLE_BROADCAST_KEY_PREVIOUS']);
    const values = { LAMBDACABLE_BROADCAST_KEY: 'k'.repeat(32), LAMBDACABLE_JWT_SECRET: 'j' };
    expect(secretEnvironment(variables, parameters)).toEqual({
      LAMBDACABLE_BROADCAST_KEY_PARAM: '/lambdacable/dev/broadcast-key',
      LAMBDACABLE_BROADCAST_KEY_PREVIOUS_PARAM: '/lambdacable/dev/broadcast-key-previous',
    });
    expect(secretEnvironment(variables, parameters, values)).toEqual({
      LAMBDACABLE_BROADCAST_KEY: 'k'.repeat(32),
    });
    expect(isOfflineCommand(['offline', 'start', '--stage', 'local', '--useInProcess'])).toBe(true);
    expect(isOfflineCommand(['package', '--stage', 'offline'])).toBe(false);
    expect(isOfflineCommand(['deploy'])).toBe(false);
  });

  it('lets a function read a Secrets Manager secret (by name: its ARN pattern; by ARN: that ARN) instead', () => {
    const { Resources } = cloudFormation({
      prefix: 'lambdacable-prod',
      stage: 'prod',
      functionName: (key) => `lambdacable-prod-${key}`,
      secrets: {
        LAMBDACABLE_JWT_SECRET: 'secretsmanager:prod/jwt',
        LAMBDACABLE_STREAMS_SECRET:
          'arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/streams-AbCdEf',
        LAMBDACABLE_STREAMS_SECRET_PREVIOUS: '/lambdacable/prod/streams-secret-previous',
      },
    });
    const reads = (role: string) =>
      statementsOf(Resources, role).filter((s) =>
        [s.Action].flat().some((a: string) => /^(ssm|secretsmanager|kms):/.test(a)),
      );
    expect(reads('WsConnectRole')).toEqual([
      {
        Effect: 'Allow',
        Action: ['ssm:GetParameter'],
        Resource: [
          {
            'Fn::Sub': `arn:\${AWS::Partition}:ssm:\${AWS::Region}:\${AWS::AccountId}:parameter/lambdacable/prod/streams-secret-previous`,
          },
        ],
      },
      {
        Effect: 'Allow',
        Action: ['secretsmanager:GetSecretValue'],
        Resource: [
          {
            'Fn::Sub': `arn:\${AWS::Partition}:secretsmanager:\${AWS::Region}:\${AWS::AccountId}:secret:prod/jwt-??????`,
          },
          'arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/streams-AbCdEf',
        ],
      },
    ]);
    // No broadcast key's parameter named: no grant at all.
    expect(reads('HttpBroadcastRole')).toEqual([]);
    expect(reads('PingerRole')).toEqual([]);
  });
});
