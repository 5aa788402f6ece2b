import { benchAckManager } from './ack-manager';
import { benchLocalStack } from './local-stack';
import { benchRelay } from './relay';
import { print } from './util';

print('AckManager (read in order, ack shuffled)', benchAckManager());
print(
  'Outbox relay on the local services (batched vs one SendMessage per event)',
  await benchRelay(),
);
print(
  'Local stack (npm start): commit → client, and connect → welcome of crowds connecting at once',
  await benchLocalStack(),
);
