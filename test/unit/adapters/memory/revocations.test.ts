import { MemoryRevocationStore } from '../../../../lib/core';
import { revocationStoreContract } from '../../../contract/revocations';

revocationStoreContract('MemoryRevocationStore', async () => new MemoryRevocationStore());
