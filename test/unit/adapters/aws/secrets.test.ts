import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SSMClient } from '@aws-sdk/client-ssm';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { AwsSecrets } from '../../../../lib/aws';
import { ConfigError, configFromEnv, resolveSecrets, secretSettings } from '../../../../lib/core';

/**
 * A loopback stand-in for the JSON APIs of SSM (`AmazonSSM.GetParameter`) and Secrets Manager
 * (`secretsmanager.GetSecretValue`): values by name, each request counted.
 */
class StoreStandIn {
  readonly parameters = new Map<string, string>();
  readonly secrets = new Map<string, string>();
  /** Names whose reads are refused (AccessDeniedException). */
  readonly denied = new Set<string>();
  readonly reads: { target: string; name: string; decrypt?: boolean }[] = [];
  private server: Server | undefined;

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => {
        body += chunk;
      });
      req.on('end', () => {
        const target = String(req.headers['x-amz-target']);
        const input = JSON.parse(body) as Record<string, unknown>;
        const name = String(input.Name ?? input.SecretId);
        this.reads.push({ target, name, decrypt: input.WithDecryption as boolean | undefined });
        const answer = (status: number, json: unknown) => {
          res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1' });
          res.end(JSON.stringify(json));
        };
        if (this.denied.has(name)) return answer(400, { __type: 'AccessDeniedException' });
        if (target === 'AmazonSSM.GetParameter') {
          const value = this.parameters.get(name);
          if (value === undefined) return answer(400, { __type: 'ParameterNotFound' });
          return answer(200, {
            Parameter: { Name: name, Value: value, Type: 'SecureString', Version: 1 },
          });
        }
        if (target === 'secretsmanager.GetSecretValue') {
          const value = this.secrets.get(name);
          if (value === undefined) return answer(400, { __type: 'ResourceNotFoundException' });
          return answer(200, {
            ARN: `arn:aws:secretsmanager:us-east-1:1:secret:${name}-abcdef`,
            Name: name,
            SecretString: value,
          });
        }
        return answer(400, { __type: 'UnknownOperationException' });
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    await new Promise((r) => this.server?.close(r));
  }

  readsOf(name: string): number {
    return this.reads.filter((r) => r.name === name).length;
  }
}

const JWT = 'jwt-secret-0123456789abcdef0123456789';
const JWT_BEFORE = 'jwt-secret-before-0123456789abcdef01234';
const STREAMS = 'streams-secret-0123456789abcdef0123456789';
const BROADCAST = 'broadcast-key-0123456789abcdef0123456789';

describe('secrets from SSM Parameter Store and Secrets Manager (a loopback stand-in)', () => {
  const store = new StoreStandIn();
  let endpoint: string;
  const clientConfig = () => ({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    maxAttempts: 1,
  });
  const secrets = (maxAge = 300, onStale = vi.fn()) =>
    new AwsSecrets({
      ssm: new SSMClient(clientConfig()),
      secretsManager: new SecretsManagerClient(clientConfig()),
      maxAge,
      onStale,
    });
  /** The gateway settings of a function's environment, its secrets read with `reader`. */
  const configOf = async (env: Record<string, string>, reader = secrets()) => {
    const settings = secretSettings(env);
    return configFromEnv(await resolveSecrets(env, settings, (r) => reader.read(r)));
  };

  beforeAll(async () => {
    endpoint = await store.start();
  });
  afterAll(async () => {
    await store.stop();
  });
  beforeEach(() => {
    store.parameters.clear();
    store.secrets.clear();
    store.denied.clear();
    store.reads.length = 0;
    // Powertools' cache reads Date.now(): only the date is faked, sockets and timers are real.
    vi.useFakeTimers({ toFake: ['Date'], now: new Date('2026-01-01T00:00:00Z') });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('reads each secret its …_PARAM names (SSM decrypted, or Secrets Manager) into the settings', async () => {
    store.parameters.set('/lambdacable/test/jwt-secret', JWT);
    store.parameters.set('/lambdacable/test/streams-secret', STREAMS);
    store.secrets.set('lambdacable/test/broadcast-key', BROADCAST);
    const config = await configOf({
      LAMBDACABLE_JWT_SECRET_PARAM: '/lambdacable/test/jwt-secret',
      LAMBDACABLE_STREAMS_SECRET_PARAM: '/lambdacable/test/streams-secret',
      LAMBDACABLE_BROADCAST_KEY_PARAM: 'secretsmanager:lambdacable/test/broadcast-key',
    });
    expect(config).toMatchObject({
      jwtSecret: JWT,
      streamsSecret: STREAMS,
      broadcastKey: BROADCAST,
    });
    expect(config.jwtPreviousSecret).toBeUndefined();
    expect(store.reads.filter((r) => r.target === 'AmazonSSM.GetParameter')).toEqual([
      { target: 'AmazonSSM.GetParameter', name: '/lambdacable/test/jwt-secret', decrypt: true },
      { target: 'AmazonSSM.GetParameter', name: '/lambdacable/test/streams-secret', decrypt: true },
    ]);
    expect(store.readsOf('lambdacable/test/broadcast-key')).toBe(1);
  });

  it('keeps a value for its max age: a read within it calls nothing, a read after it reads again', async () => {
    store.parameters.set('/jwt', JWT);
    const reader = secrets(60);
    const env = { LAMBDACABLE_JWT_SECRET_PARAM: '/jwt' };
    expect((await configOf(env, reader)).jwtSecret).toBe(JWT);
    vi.setSystemTime(Date.now() + 59_000);
    store.parameters.set('/jwt', STREAMS);
    expect((await configOf(env, reader)).jwtSecret).toBe(JWT);
    expect(store.readsOf('/jwt')).toBe(1);
    vi.setSystemTime(Date.now() + 2_000);
    expect((await configOf(env, reader)).jwtSecret).toBe(STREAMS);
    expect(store.readsOf('/jwt')).toBe(2);
  });

  it('takes a value set directly over its parameter (npm start, tests), and reads nothing', async () => {
    const config = await configOf({
      LAMBDACABLE_JWT_SECRET: JWT,
      LAMBDACABLE_JWT_SECRET_PARAM: '/lambdacable/test/jwt-secret',
    });
    expect(config.jwtSecret).toBe(JWT);
    expect(store.reads).toEqual([]);
  });

  it('refuses a current key whose parameter does not exist: a ConfigError naming the variable and the parameter', async () => {
    const refused = await configOf({
      LAMBDACABLE_JWT_SECRET_PARAM: '/lambdacable/test/nothing',
    }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ConfigError);
    expect((refused as ConfigError).variable).toBe('LAMBDACABLE_JWT_SECRET_PARAM');
    expect((refused as Error).message).toBe(
      'SSM parameter /lambdacable/test/nothing (LAMBDACABLE_JWT_SECRET_PARAM) does not exist or is empty: create it (docs/configuration.md, "Secrets")',
    );
    const secret = await configOf({
      LAMBDACABLE_BROADCAST_KEY_PARAM: 'secretsmanager:lambdacable/test/nothing',
    }).catch((e: unknown) => e);
    expect((secret as Error).message).toMatch(
      /^Secrets Manager secret lambdacable\/test\/nothing \(LAMBDACABLE_BROADCAST_KEY_PARAM\) does not exist/,
    );
  });

  it('refuses a value under 32 bytes: a ConfigError naming the variable and the parameter, never the value', async () => {
    store.parameters.set('/short', 'too-short-a-key');
    const refused = await configOf({ LAMBDACABLE_STREAMS_SECRET_PARAM: '/short' }).catch(
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(ConfigError);
    expect((refused as ConfigError).variable).toBe('LAMBDACABLE_STREAMS_SECRET');
    expect((refused as Error).message).toBe(
      'LAMBDACABLE_STREAMS_SECRET (from SSM parameter /short (LAMBDACABLE_STREAMS_SECRET_PARAM)) is 15 bytes, a key needs at least 32 (256 bits): generate one with `openssl rand -base64 32`',
    );
    expect((refused as Error).message).not.toContain('too-short-a-key');
  });

  it('rotates: the current and the previous key are both read; a previous parameter that does not exist leaves it unset, asked again only after the max age', async () => {
    const env = {
      LAMBDACABLE_JWT_SECRET_PARAM: '/jwt',
      LAMBDACABLE_JWT_SECRET_PREVIOUS_PARAM: '/jwt-previous',
    };
    const reader = secrets(60);
    store.parameters.set('/jwt', JWT_BEFORE);
    // No rotation going on: no previous key.
    expect(await configOf(env, reader)).toMatchObject({ jwtSecret: JWT_BEFORE });
    expect((await configOf(env, reader)).jwtPreviousSecret).toBeUndefined();
    expect(store.readsOf('/jwt-previous')).toBe(1);

    // The rotation: the previous key first, then the new one in place of it.
    store.parameters.set('/jwt-previous', JWT_BEFORE);
    store.parameters.set('/jwt', JWT);
    vi.setSystemTime(Date.now() + 61_000);
    expect(await configOf(env, reader)).toMatchObject({
      jwtSecret: JWT,
      jwtPreviousSecret: JWT_BEFORE,
    });

    // Its end: the previous parameter deleted.
    store.parameters.delete('/jwt-previous');
    vi.setSystemTime(Date.now() + 61_000);
    const after = await configOf(env, reader);
    expect(after.jwtSecret).toBe(JWT);
    expect(after.jwtPreviousSecret).toBeUndefined();
  });

  it('keeps the value read before when a read again fails (told to onStale); a first read that fails is a ConfigError naming the parameter', async () => {
    const onStale = vi.fn();
    const reader = secrets(60, onStale);
    store.parameters.set('/jwt', JWT);
    const env = { LAMBDACABLE_JWT_SECRET_PARAM: '/jwt' };
    expect((await configOf(env, reader)).jwtSecret).toBe(JWT);
    store.denied.add('/jwt');
    vi.setSystemTime(Date.now() + 61_000);
    expect((await configOf(env, reader)).jwtSecret).toBe(JWT);
    expect(onStale).toHaveBeenCalledTimes(1);
    expect(onStale.mock.calls[0]![0]).toMatchObject({
      variable: 'LAMBDACABLE_JWT_SECRET',
      id: '/jwt',
    });

    const refused = await configOf(env, secrets()).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ConfigError);
    expect((refused as ConfigError).variable).toBe('LAMBDACABLE_JWT_SECRET_PARAM');
    expect((refused as Error).message).toMatch(
      /^cannot read SSM parameter \/jwt \(LAMBDACABLE_JWT_SECRET_PARAM\): /,
    );
  });
});

describe('secretSettings', () => {
  it('names a Secrets Manager secret by its prefix or its ARN, and an SSM parameter otherwise', () => {
    const { references, maxAge } = secretSettings({
      LAMBDACABLE_JWT_SECRET_PARAM: '/lambdacable/prod/jwt-secret',
      LAMBDACABLE_STREAMS_SECRET_PARAM: 'secretsmanager:prod/streams',
      LAMBDACABLE_BROADCAST_KEY_PARAM:
        'arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/broadcast-AbCdEf',
      LAMBDACABLE_BROADCAST_KEY_PREVIOUS_PARAM: 'arn:aws:ssm:eu-west-1:123456789012:parameter/old',
      LAMBDACABLE_JWT_SECRET_PREVIOUS_PARAM: '',
    });
    expect(maxAge).toBe(300);
    expect(references).toEqual([
      {
        variable: 'LAMBDACABLE_JWT_SECRET',
        store: 'ssm',
        id: '/lambdacable/prod/jwt-secret',
        optional: false,
      },
      {
        variable: 'LAMBDACABLE_STREAMS_SECRET',
        store: 'secretsmanager',
        id: 'prod/streams',
        optional: false,
      },
      {
        variable: 'LAMBDACABLE_BROADCAST_KEY',
        store: 'secretsmanager',
        id: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/broadcast-AbCdEf',
        optional: false,
      },
      {
        variable: 'LAMBDACABLE_BROADCAST_KEY_PREVIOUS',
        store: 'ssm',
        id: 'arn:aws:ssm:eu-west-1:123456789012:parameter/old',
        optional: true,
      },
    ]);
  });

  it('reads LAMBDACABLE_SECRETS_MAX_AGE, and refuses one that is not a positive integer', () => {
    expect(secretSettings({ LAMBDACABLE_SECRETS_MAX_AGE: '30' }).maxAge).toBe(30);
    expect(() => secretSettings({ LAMBDACABLE_SECRETS_MAX_AGE: '0' })).toThrow(
      'LAMBDACABLE_SECRETS_MAX_AGE must be a positive integer (seconds), got: 0',
    );
  });
});
