/**
 * The `$default` route's SQS integration in serverless-offline (which has Lambda integrations
 * only), for `npm start`: when `LAMBDACABLE_OFFLINE_FRAMES` is set, preload.mjs wraps
 * serverless-offline's private `WebSocketClients` so that every text frame a client sends goes
 * to the frames queue through frames-integration.mjs, in order per connection, as API Gateway's
 * SQS integration sends it.
 *
 * serverless-offline still sees each frame afterwards: its own listener resets the
 * connection's idle timeout (600 s, API Gateway's 10 minutes) and then finds no route for it,
 * since no function may declare a frame route while the frames go to the queue (a declared
 * one would be invoked for the same frame: refused at startup).
 */
import { checkRequestTemplate, framesIntegration } from './frames-integration.mjs';
import { OFFLINE_HOOK_ERROR } from './hook-check.mjs';

/**
 * The environment variable that turns the integration on: JSON of {@link framesSettings}.
 * infra/local/offline/launch.ts sets it.
 */
export const FRAMES_VARIABLE = 'LAMBDACABLE_OFFLINE_FRAMES';

/** The close code API Gateway ends a connection with when its client sends a binary frame. */
export const BINARY_FRAME_CLOSE_CODE = 1003;

/**
 * The settings in {@link FRAMES_VARIABLE}: `{ queueUrl, endpoint, region, template,
 * credentials: { accessKeyId, secretAccessKey } }`, all strings (the local SQS endpoint and
 * its dummy credentials). Throws naming what is missing.
 */
export function framesSettings(text) {
  let settings;
  try {
    settings = JSON.parse(text);
  } catch (error) {
    throw new Error(`${FRAMES_VARIABLE} is not JSON: ${error.message}`);
  }
  const missing = ['queueUrl', 'endpoint', 'region', 'template']
    .filter((key) => typeof settings?.[key] !== 'string' || settings[key] === '')
    .concat(
      ['accessKeyId', 'secretAccessKey']
        .filter((key) => typeof settings?.credentials?.[key] !== 'string')
        .map((key) => `credentials.${key}`),
    );
  if (missing.length) {
    throw new Error(`${FRAMES_VARIABLE} has no ${missing.join(', ')} (strings expected)`);
  }
  const { queueUrl, endpoint, region, template, credentials } = settings;
  const { accessKeyId, secretAccessKey } = credentials;
  return { queueUrl, endpoint, region, template, credentials: { accessKeyId, secretAccessKey } };
}

/**
 * A `send` for the integration: SendMessage through an SQS client of the local endpoint. Its
 * SDK retries stand for the real queue's availability; the deduplication id of a retried send
 * is the same, so the FIFO queue does not take it twice.
 */
export async function sqsSender({ endpoint, region, credentials }) {
  // Imported only when the integration is on.
  const { SQSClient, SendMessageCommand } = await import('@aws-sdk/client-sqs');
  const client = new SQSClient({ endpoint, region, credentials });
  return (input) => client.send(new SendMessageCommand(input));
}

/**
 * Wraps `WebSocketClients.prototype` (serverless-offline's WebSocketClients.js, checked by
 * hook-check.mjs): `addClient` gets the connection's "message" listener replaced by one that
 * first hands a text frame to `integration.receive` and then calls serverless-offline's; a
 * failed frame is told on `log` and answered with API Gateway's error frame. A binary frame is
 * refused as API Gateway refuses it: the connection is closed with 1003, nothing is sent.
 * `addRoute` throws for any route but `$connect` and `$disconnect`.
 */
export function hookWebSocketClients(WebSocketClients, integration, log = console.error) {
  const prototype = WebSocketClients.prototype;
  const { addClient, addRoute } = prototype;

  prototype.addRoute = function (functionKey, definition) {
    const route = definition?.route;
    if (route !== '$connect' && route !== '$disconnect') {
      throw new Error(
        `${OFFLINE_HOOK_ERROR}: ${FRAMES_VARIABLE}: the function ${functionKey} declares the ` +
          `WebSocket route ${route}, but every frame goes to the frames queue (the $default ` +
          "route's SQS integration, without route selection): it would be served twice. Only " +
          '$connect and $disconnect may have functions.',
      );
    }
    return addRoute.call(this, functionKey, definition);
  };

  prototype.addClient = function (client, connectionId) {
    const connectedAt = Date.now();
    const ownOn = Object.hasOwn(client, 'on') ? client.on : undefined;
    const on = client.on;
    let replaced = 0;
    client.on = function (event, listener) {
      if (event !== 'message') return on.call(this, event, listener);
      replaced++;
      return on.call(this, event, function (data, isBinary) {
        // API Gateway takes no binary frame: it closes the connection with 1003 ("Binary media
        // types for WebSocket APIs"), rather than base64 it into the template.
        if (isBinary) {
          client.close(BINARY_FRAME_CLOSE_CODE);
          return;
        }
        // A text frame's bytes, read as serverless-offline reads them (ws checked their UTF-8).
        integration.receive(connectionId, String(data), { connectedAt }).catch((error) => {
          log(`lambdacable offline: ${error.message}`);
          if (client.readyState === client.OPEN) client.send(error.frame);
        });
        return listener.call(this, data, isBinary);
      });
    };
    let added;
    try {
      added = addClient.call(this, client, connectionId);
    } finally {
      if (ownOn) client.on = ownOn;
      else delete client.on;
    }
    // hook-check.mjs read addClient's source: this holds unless a frame could go unsent.
    if (replaced !== 1) {
      throw new Error(
        `${OFFLINE_HOOK_ERROR}: ${FRAMES_VARIABLE}: WebSocketClients.addClient registered ` +
          `${replaced} "message" listeners, 1 expected`,
      );
    }
    return added;
  };
}

/**
 * Turns the integration on from the text of {@link FRAMES_VARIABLE}: the settings, the
 * template (checked now), the SQS client, the wrapped `WebSocketClients`. Returns what went
 * wrong, starting as hook-check.mjs's problems do, or undefined.
 */
export async function hookFrames(text, WebSocketClients, log = console.error) {
  try {
    const settings = framesSettings(text);
    // Before the SQS client is made: a refused template is the one thing said.
    checkRequestTemplate(settings.template);
    const integration = framesIntegration({
      queueUrl: settings.queueUrl,
      template: settings.template,
      send: await sqsSender(settings),
    });
    hookWebSocketClients(WebSocketClients, integration, log);
    return undefined;
  } catch (error) {
    return `${OFFLINE_HOOK_ERROR}: ${FRAMES_VARIABLE}: ${error.message}`;
  }
}
