import { benchAckManager } from './ack-manager';
import { benchConnectCost } from './connect-cost';
import { benchDeliveryCost } from './delivery-cost';
import { benchFanoutLatency, FANOUT_CLIENTS } from './fanout-latency';
import { benchFanoutReads } from './fanout-reads';
import { benchKeepalive } from './keepalive';
import { benchCrowds, benchPathLatency } from './local-stack';
import { benchPostCpu } from './post-cpu';
import { benchRelay } from './relay';
import { BENCH_SECRETS, sleep, startBenchStack } from './stack';
import { print, printFigures } from './util';

print('AckManager (read in order, ack shuffled)', benchAckManager());
print(
  'Outbox relay on the local services (batched vs one SendMessage per event)',
  await benchRelay(),
);
printFigures(
  'Keepalive: the Pinger over one simulated minute, 1,000 connections',
  await benchKeepalive(),
);
const postCpu = await benchPostCpu();
printFigures(
  "PostToConnection: the caller's CPU per post (the broadcast function's, per subscriber)",
  postCpu.figures,
);
printFigures(
  'Fan-out reads: our byStream Query vs the AWS sample chat app Scan (DynamoDB Local)',
  await benchFanoutReads(),
);

// One local stack (npm start on free ports) for the rest, every AWS call on record.
const bench = await startBenchStack();
try {
  printFigures(
    'Local stack: broadcast → client, by service transaction (outbox), HTTP and demo:publish',
    await benchPathLatency(bench.stack, BENCH_SECRETS),
  );
  const { requests, cost } = await benchDeliveryCost(bench, BENCH_SECRETS);
  printFigures(
    'AWS requests per event (100 subscribers, 50 broadcasts over HTTP; one by one / burst)',
    requests,
  );
  printFigures('List price per million deliveries (us-east-1, bench/prices.ts)', cost);
  await sleep(5_000); // the disconnects of the last clients drain first
  printFigures(
    "AWS requests per connect (wsConnect, the pinger's welcome)",
    await benchConnectCost(bench, BENCH_SECRETS),
  );
  await sleep(5_000);
  print(
    'Local stack: connect → welcome of crowds of default clients connecting at once',
    await benchCrowds(bench.stack, BENCH_SECRETS),
  );
  printFigures(
    `Fan-out to ${FANOUT_CLIENTS} subscribers: local stack vs a bare ws server`,
    await benchFanoutLatency(bench, BENCH_SECRETS, postCpu.microsPerPost),
  );
} finally {
  await bench.stop();
}
