import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { addFrameLimitMetrics, gateway, metrics } from './runtime';
import { withSecrets } from './secrets';

/** `$default`: every client frame (subscribe, history, whisper, ...). */
export const handler = async (event: APIGatewayProxyEvent): Promise<APIGatewayProxyResult> => {
  const rt = await withSecrets();
  const gw = gateway();
  await gw.receive(
    event.requestContext.connectionId!,
    event.body ?? '',
    rt.managementEndpoint(event.requestContext),
  );
  const counts = gw.takeCounts();
  // Published only when the limit refused something: a metric line per frame costs.
  if (counts.rateLimitedFrames > 0) {
    const m = metrics();
    addFrameLimitMetrics(m, counts);
    m.publishStoredMetrics();
  }
  return { statusCode: 200, body: '' };
};
