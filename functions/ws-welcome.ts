import { gateway, runtime } from './runtime';

/** Attempts and pause between them: the connection becomes reachable once $connect returned. */
const ATTEMPTS = 40;
const PAUSE_MS = 100;

/**
 * Invoked asynchronously by `ws-connect`: delivers `welcome` (or the `unauthorized`
 * disconnect) once API Gateway has established the connection, so the client's wait for
 * welcome always ends.
 */
export const handler = async (event: { connectionId: string }): Promise<{ delivered: boolean }> => {
  const { logger } = runtime();
  const gw = gateway();
  for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
    if (await gw.welcome(event.connectionId)) return { delivered: true };
    await new Promise((r) => setTimeout(r, PAUSE_MS));
  }
  logger.warn('welcome not delivered: the connection never became reachable', {
    connectionId: event.connectionId,
  });
  return { delivered: false };
};
