import { benchAckManager } from './ack-manager';
import { benchConnectCost } from './connect-cost';
import { benchDeliveryCost } from './delivery-cost';
import { benchFanoutLatency, FANOUT_CLIENTS } from './fanout-latency';
import { benchFanoutReads } from './fanout-reads';
import { benchFrameOrder, FRAME_ORDER_BENCH_ENV } from './frame-order';
import { benchKeepalive } from './keepalive';
import { benchCrowds, benchPathLatency } from './local-stack';
import { benchPostCpu } from './post-cpu';
import { benchPresenceCost, PRESENCE_BENCH_ENV } from './presence-cost';
import { benchPresenceRead } from './presence-read';
import { benchRelay } from './relay';
import {
  fanoutFigures,
  fanoutInputs,
  fanoutModel,
  keepaliveFigures,
  keepaliveModel,
  localFigures,
} from './scale';
import { runLocalScale } from './scale-local';
import { BENCH_SECRETS, sleep, startBenchStack } from './stack';
import { print, printFigures } from './util';

/**
 * `npm run bench` runs every section; `npm run bench -- <section> ...` only those named.
 * The local-stack sections share one stack, started only when one of them runs.
 */
const SECTIONS = [
  'ack-manager',
  'relay',
  'keepalive',
  'post-cpu',
  'fanout-reads',
  'presence-read',
  'path-latency',
  'frame-order',
  'delivery-cost',
  'connect-cost',
  'presence-cost',
  'crowds',
  'fanout-latency',
  'scale',
] as const;
type Section = (typeof SECTIONS)[number];
const STACK_SECTIONS: readonly Section[] = [
  'path-latency',
  'frame-order',
  'delivery-cost',
  'connect-cost',
  'presence-cost',
  'crowds',
  'fanout-latency',
];

const asked = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const unknown = asked.filter((a) => !(SECTIONS as readonly string[]).includes(a));
if (unknown.length > 0) {
  console.error(
    `unknown bench section: ${unknown.join(', ')}; the sections: ${SECTIONS.join(', ')}`,
  );
  process.exit(2);
}
const runs = (section: Section) => asked.length === 0 || asked.includes(section);

if (runs('ack-manager')) print('AckManager (read in order, ack shuffled)', benchAckManager());
if (runs('relay')) {
  print(
    'Outbox relay on the local services (batched vs one SendMessage per event)',
    await benchRelay(),
  );
}
if (runs('keepalive')) {
  printFigures(
    'Keepalive: the Pinger over one simulated minute, 1,000 connections',
    await benchKeepalive(),
  );
}
// The fan-out-latency section models its floor on the CPU per post measured here.
const postCpu =
  runs('post-cpu') || runs('fanout-latency') || runs('scale') ? await benchPostCpu() : undefined;
if (postCpu && runs('post-cpu')) {
  printFigures(
    "PostToConnection: the caller's CPU per post (the broadcast function's, per subscriber)",
    postCpu.figures,
  );
}
if (runs('fanout-reads')) {
  printFigures(
    'Fan-out reads: our byStreamShard Query vs the AWS sample chat app Scan (DynamoDB Local)',
    await benchFanoutReads(),
  );
}
if (runs('presence-read')) {
  printFigures(
    'Presence read of a large stream (info, presenceOf): the count items vs reading every member',
    await benchPresenceRead(),
  );
}

if (STACK_SECTIONS.some(runs)) {
  // One local stack (npm start on free ports) for the rest, every AWS call on record; a short
  // presence TTL when presence-cost runs (no other section joins a presence).
  const bench = await startBenchStack({
    ...(runs('presence-cost') ? PRESENCE_BENCH_ENV : {}),
    ...(runs('frame-order') ? FRAME_ORDER_BENCH_ENV : {}),
  });
  try {
    if (runs('path-latency')) {
      printFigures(
        'Local stack: broadcast → client, by service transaction (outbox), HTTP and demo:publish',
        await benchPathLatency(bench.stack, BENCH_SECRETS),
      );
    }
    if (runs('frame-order')) {
      printFigures(
        "Ordered frames: the frames FIFO queue vs one wsDefault invocation per frame (today's Lambda integration)",
        await benchFrameOrder(bench, BENCH_SECRETS),
      );
      await sleep(2_000);
    }
    if (runs('delivery-cost')) {
      const { requests, cost } = await benchDeliveryCost(bench, BENCH_SECRETS);
      printFigures(
        'AWS requests per event (100 subscribers, 50 broadcasts over HTTP; one by one / burst)',
        requests,
      );
      printFigures('List price per million deliveries (us-east-1, bench/prices.ts)', cost);
      await sleep(5_000); // the disconnects of the last clients drain first
    }
    if (runs('connect-cost')) {
      printFigures(
        "AWS requests per connect (wsConnect, the pinger's welcome)",
        await benchConnectCost(bench, BENCH_SECRETS),
      );
      await sleep(5_000);
    }
    if (runs('presence-cost')) {
      const { requests, cost } = await benchPresenceCost(bench, BENCH_SECRETS);
      printFigures('AWS requests per presence operation (join, read, leave, expiry)', requests);
      printFigures('List price per million presence operations (us-east-1, bench/prices.ts)', cost);
      await sleep(5_000);
    }
    if (runs('crowds')) {
      print(
        'Local stack: connect → welcome of crowds of default clients connecting at once',
        await benchCrowds(bench.stack, BENCH_SECRETS),
      );
    }
    if (postCpu && runs('fanout-latency')) {
      printFigures(
        `Fan-out to ${FANOUT_CLIENTS} subscribers: local stack vs a bare ws server`,
        await benchFanoutLatency(bench, BENCH_SECRETS, postCpu.microsPerPost),
      );
    }
  } finally {
    await bench.stop();
  }
}

if (postCpu && runs('scale')) {
  // The model at each size, from the CPU per post measured above; then a real run of the
  // functions on the emulators (a stack of its own, after the shared one stopped).
  const inputs = fanoutInputs(postCpu.microsPerPost);
  const fanout = await fanoutModel(inputs);
  printFigures(
    'Scale: one broadcast by fan-out tasks (modelled at AWS sizes)',
    fanoutFigures(inputs, fanout),
  );
  const keepalive = keepaliveModel();
  printFigures(
    'Scale: keepalive by pinger partitions (modelled: the planner and partition scopes)',
    keepaliveFigures(keepalive, inputs),
  );
  const local = await runLocalScale({ subscribers: 10_000, frames: 4, ratePerSecond: 2_000 });
  printFigures(
    'Scale: 10,000 stand-in subscribers through the functions on the emulators, posts throttled',
    localFigures(local),
  );
  if (process.argv.includes('--json')) {
    const { subscribers, lastPostMs, invocations, maxPostsPerInvocation, everyFrameOnceInOrder } =
      local;
    console.log(
      JSON.stringify({
        fanout,
        keepalive,
        local: {
          subscribers,
          lastPostMs,
          invocations,
          maxPostsPerInvocation,
          everyFrameOnceInOrder,
          throttledPosts: local.throttledPosts,
          lostFrames: local.lostFrames,
        },
      }),
    );
  }
}
