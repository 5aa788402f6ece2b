import { runtime } from './runtime';

/** Invoked asynchronously by `ws-connect`: delivers `welcome` once the connection exists. */
export const handler = async (event: {
  connectionId: string;
  endpoint?: string;
}): Promise<{ delivered: boolean }> => {
  const { gateway } = runtime();
  const delivered = await gateway.welcome(event.connectionId);
  return { delivered };
};
