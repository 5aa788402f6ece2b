import { benchAckManager } from './ack-manager';
import { benchRelay } from './relay';
import { print } from './util';

print('AckManager (read in order, ack shuffled)', benchAckManager());
print(
  'Outbox relay on the local services (batched vs one SendMessage per event)',
  await benchRelay(),
);
