import { MemoryRequestIdStore } from '../../../../lib/testing';
import { CLAIM_TTL_SECONDS, requestIdStoreContract } from '../../../contract/request-ids';

requestIdStoreContract(
  'MemoryRequestIdStore',
  async (clock) => new MemoryRequestIdStore({ ttlSeconds: CLAIM_TTL_SECONDS, clock }),
);
