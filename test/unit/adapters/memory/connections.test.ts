import { describe, expect, it } from 'vitest';
import { MemoryAckStore, MemoryConnectionStore } from '../../../../lib/testing';
import { connectionStoreContract } from '../../../contract/connections';
import { indexProbeContract } from '../../../contract/connections-index';

connectionStoreContract('MemoryConnectionStore', () => new MemoryConnectionStore());
indexProbeContract('MemoryConnectionStore', () => new MemoryConnectionStore());

describe('MemoryAckStore', () => {
  it('only moves a level forward', async () => {
    const store = new MemoryAckStore();
    expect(await store.load('g', 'p')).toBeUndefined();
    await store.save('g', 'p', 10n);
    await store.save('g', 'p', 5n);
    expect(await store.load('g', 'p')).toBe(10n);
    await store.save('g', 'p', 11n);
    expect(await store.load('g', 'p')).toBe(11n);
    expect(await store.load('g', 'other')).toBeUndefined();
  });
});
