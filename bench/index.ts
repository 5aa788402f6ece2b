import { benchAckManager } from './ack-manager';
import { print } from './util';

print('AckManager (read in order, ack shuffled)', benchAckManager());
