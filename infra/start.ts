/**
 * `npm start`: the whole system on 127.0.0.1 (see infra/local-stack.ts). Prints the
 * endpoints and a ready-to-use example; Ctrl-C stops every process it started.
 */
import { createConnectToken, signStreamName } from '../lib';
import { startLocalStack } from './local-stack';

const DEV_DEFAULTS: Record<string, string> = {
  LAMBDACABLE_JWT_SECRET: 'local-jwt-secret',
  LAMBDACABLE_STREAMS_SECRET: 'local-streams-secret',
  LAMBDACABLE_BROADCAST_KEY: 'local-broadcast-key',
};

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const env: Record<string, string> = {};
for (const [name, fallback] of Object.entries(DEV_DEFAULTS))
  env[name] = process.env[name] || fallback;
for (const [name, value] of Object.entries(process.env)) {
  if (name.startsWith('LAMBDACABLE_') && value !== undefined) env[name] = value;
}

console.log('lambdacable: starting DynamoDB Local, fauxqs and serverless-offline on 127.0.0.1 ...');
const stack = await startLocalStack({ env });
const token = await createConnectToken(
  { sub: 'demo-user', ttlSeconds: 3600 },
  env.LAMBDACABLE_JWT_SECRET!,
);
const signed = signStreamName('demo', env.LAMBDACABLE_STREAMS_SECRET!);

console.log(`
lambdacable is running (stage "local"):
  WebSocket   ${stack.wsUrl}   (subprotocol actioncable-v1-ext-json)
  Broadcast   POST ${stack.httpUrl}/_broadcast   (Authorization: Bearer ${env.LAMBDACABLE_BROADCAST_KEY})
  DynamoDB    ${stack.dynamodbEndpoint}   SQS ${stack.sqsEndpoint}

Connect a client (@anycable/web or @anycable/core):
  createCable('${stack.wsUrl}?jid=${token}')
  cable.streamFromSigned('${signed}')       // the stream "demo"

Broadcast to it, over HTTP:
  curl -X POST ${stack.httpUrl}/_broadcast -H 'Authorization: Bearer ${env.LAMBDACABLE_BROADCAST_KEY}' \\
    -d '{"stream":"demo","data":"{\\"text\\":\\"hello\\"}"}'
or from a service transaction:
  npm run demo:publish -- --stream demo --data '{"text":"hello"}'

Ctrl-C stops everything.`);

let stopping = false;
const shutdown = async () => {
  if (stopping) return;
  stopping = true;
  console.log('\nlambdacable: stopping ...');
  await stack.stop();
  process.exit(0);
};
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);
