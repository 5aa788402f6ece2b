import { describe, expect, it } from 'vitest';
import { connectResponse } from '../../../functions/ws-connect';
import { gatewayHarness } from '../../helpers/gateway';

const gateway = () => gatewayHarness({ config: { allowAnonymous: true } }).gateway;

describe('ws-connect response', () => {
  it('answers Sec-WebSocket-Protocol with the negotiated subprotocol', async () => {
    const result = await gateway().connect({
      connectionId: 'c1',
      query: {},
      protocols: 'actioncable-v1-json, actioncable-v1-ext-json',
    });
    expect(connectResponse(result)).toEqual({
      statusCode: 200,
      headers: { 'Sec-WebSocket-Protocol': 'actioncable-v1-ext-json' },
      body: '',
    });
  });

  it('refuses a handshake that offers no Action Cable subprotocol, without the header', async () => {
    const result = await gateway().connect({
      connectionId: 'c2',
      query: {},
      protocols: 'graphql-ws',
    });
    expect(connectResponse(result)).toEqual({ statusCode: 400, headers: {}, body: '' });
  });
});
