/**
 * `npm run relay:replay -- (--local | --stage <stage>) [options]`: relays again the committed
 * events that the stream relay gave up on. Reads each record of the `relay-failures` queue
 * (or one from a file or stdin), reads the shard range it names from the outbox stream and the
 * events from the outbox table, sends them as the relay did (same id, group and offset) and
 * deletes the record once every event it names was sent. A record the relay parked (refused:
 * unreadable, oversize, or refused by SQS with SenderFault) is sent again from its copy in the
 * message. Prints a line per record and the
 * events; exits 0 when every record was replayed, 1 when one was kept, 2 on bad usage.
 * See docs/consumers.md, "Replaying relay failures".
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import { GetQueueUrlCommand, SQSClient } from '@aws-sdk/client-sqs';
import { replayBody } from '../../lib/adapters/aws/relay/replay';
import {
  OutboxRelay,
  type RelayReplayOptions,
  type RelayReplayReport,
  replayRelayFailures,
} from '../../lib/aws';
import { consumerGroupsFor } from '../deploy/consumers';
import { queueNames, relayFailuresQueueName, tableName } from '../deploy/names';
import { LOCAL_CREDENTIALS, LOCAL_HOST, LOCAL_REGION } from '../local/services';

const USAGE = `usage: npm run relay:replay -- (--local | --stage <stage>) [options]
  --local                 npm start's stack (DynamoDB Local and fauxqs on 127.0.0.1, stage local)
  --stage <stage>         the deployed stage; region and credentials from the default chain
  --prefix <prefix>       physical name prefix (default lambdacable-<stage>)
  --region <region>       AWS region (default: AWS_REGION / the profile's)
  --file <path>|-         replay one failure record (JSON) from a file or stdin, not the queue
  --queue-url <url>       the relay failures queue (default: <prefix>-relay-failures)
  --max <n>               take at most n records from the queue
  --dry-run               read and print, send and delete nothing
  --json                  one JSON report per line
  --dynamodb-endpoint <url>, --sqs-endpoint <url>   other endpoints (emulators)`;

function usage(message: string): never {
  console.error(`${message}\n${USAGE}`);
  process.exit(2);
}

let parsed: ReturnType<typeof parse>;
function parse() {
  return parseArgs({
    options: {
      local: { type: 'boolean', default: false },
      stage: { type: 'string' },
      prefix: { type: 'string' },
      region: { type: 'string' },
      file: { type: 'string' },
      'queue-url': { type: 'string' },
      max: { type: 'string' },
      'dry-run': { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      'dynamodb-endpoint': { type: 'string' },
      'sqs-endpoint': { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  }).values;
}
try {
  parsed = parse();
} catch (error) {
  usage((error as Error).message);
}
const args = parsed;
if (args.help) {
  console.log(USAGE);
  process.exit(0);
}
if (!args.local && !args.stage && !args.prefix) usage('say --local, or the --stage to replay');
const max = args.max === undefined ? undefined : Number(args.max);
if (max !== undefined && !(Number.isInteger(max) && max > 0)) usage('--max wants a number > 0');

const stage = args.stage ?? 'local';
const prefix = args.prefix ?? `lambdacable-${stage}`;
const local = args.local ? localStack(process.env) : undefined;
const config = (endpoint: string | undefined) => ({
  ...(local ? { region: local.region, credentials: local.credentials } : {}),
  ...(args.region ? { region: args.region } : {}),
  ...(endpoint ? { endpoint } : {}),
});
const dynamodbEndpoint = args['dynamodb-endpoint'] ?? local?.dynamodb;
const dynamodb = new DynamoDBClient(config(dynamodbEndpoint));
const streams = new DynamoDBStreamsClient(config(dynamodbEndpoint));
const sqs = new SQSClient(config(args['sqs-endpoint'] ?? local?.sqs));

/** npm start's stack: its region, credentials and endpoints (its ports from `env`). */
function localStack(env: Readonly<Record<string, string | undefined>>) {
  return {
    region: LOCAL_REGION,
    credentials: LOCAL_CREDENTIALS,
    dynamodb:
      env.LAMBDACABLE_DYNAMODB_ENDPOINT ||
      `http://${LOCAL_HOST}:${env.LAMBDACABLE_DYNAMODB_PORT || 8000}`,
    sqs: env.LAMBDACABLE_SQS_ENDPOINT || `http://${LOCAL_HOST}:${env.LAMBDACABLE_SQS_PORT || 9324}`,
  };
}

async function queueUrl(name: string): Promise<string> {
  try {
    const out = await sqs.send(new GetQueueUrlCommand({ QueueName: name }));
    if (out.QueueUrl) return out.QueueUrl;
  } catch (error) {
    console.error(`queue ${name}: ${(error as Error).name}: ${(error as Error).message}`);
  }
  console.error(`no queue ${name}: is ${prefix} the deployed prefix (--stage, --prefix)?`);
  process.exit(1);
}

// The deployed relay's routes: every topic to the queue of each group subscribed to it.
const routes: Record<string, string[]> = {};
for (const group of consumerGroupsFor(process.env)) {
  const url = await queueUrl(queueNames(prefix, group.name).queue);
  for (const topic of group.topics) routes[topic] = [...(routes[topic] ?? []), url];
}
const options: RelayReplayOptions = {
  streams,
  dynamodb,
  outboxTable: tableName(prefix, 'outbox'),
  relay: new OutboxRelay({
    sqs,
    routes,
    // A record the relay cannot send at all makes the replay incomplete: say why.
    onRefused: (error, seq) => console.error(`  refused ${seq}: ${error.message}`),
  }),
  dryRun: args['dry-run'],
};

const reports: RelayReplayReport[] = [];
const print = (report: RelayReplayReport) => {
  reports.push(report);
  if (args.json) {
    console.log(JSON.stringify(report));
    return;
  }
  const f = report.failure;
  const p = report.parked;
  const what = f
    ? `${f.shardId} ${f.startSequenceNumber}..${f.endSequenceNumber} (${f.condition || 'no condition'}, ${f.batchSize} records, first at ${f.approximateArrivalOfFirstRecord})`
    : p
      ? `parked record ${p.sequenceNumber} (${p.keys.pk} ${p.keys.sk}; ${p.error.code || p.error.name}: ${p.error.message})`
      : 'a record';
  const verb = { replayed: 'replayed', 'dry-run': 'would replay' }[report.outcome as string];
  console.log(
    verb
      ? `${verb} ${what}: ${report.replayed.length} event(s)${report.ignored ? `, ${report.ignored} non-insert record(s) ignored` : ''}${report.detail ? `; ${report.detail}` : ''}`
      : `kept ${what}: ${report.outcome}: ${report.detail ?? ''}`,
  );
  for (const e of report.replayed) {
    console.log(`  ${e.id} topic ${e.topic} key ${e.key} offset ${e.sequenceNumber}`);
  }
  for (const m of report.missing) {
    console.log(`  missing ${m.pk} ${m.sk} offset ${m.sequenceNumber}: ${m.reason}`);
  }
};

try {
  if (args.file !== undefined) {
    const text = readFileSync(args.file === '-' ? 0 : args.file, 'utf8');
    print(await replayBody(text.trim(), options));
  } else {
    const url = args['queue-url'] ?? (await queueUrl(relayFailuresQueueName(prefix)));
    // A dry run takes each record once and gives it back: nothing is deleted.
    await replayRelayFailures({
      ...options,
      sqs,
      queueUrl: url,
      ...(max !== undefined ? { maxMessages: max } : {}),
      onReport: print,
    });
  }
} catch (error) {
  console.error(`relay:replay failed: ${(error as Error).message}`);
  process.exit(1);
}

const done = reports.filter((r) => r.outcome === 'replayed' || r.outcome === 'dry-run');
const sent = args['dry-run'] ? 0 : reports.reduce((n, r) => n + r.replayed.length, 0);
if (!args.json) {
  console.log(
    `${reports.length} record(s): ${done.length} ${args['dry-run'] ? 'readable' : 'replayed'}, ${reports.length - done.length} kept; ${sent} event(s) relayed`,
  );
}
dynamodb.destroy();
streams.destroy();
sqs.destroy();
process.exit(done.length === reports.length ? 0 : 1);
