/** The `$default` route's SQS integration in serverless-offline (frames-hook.mjs). */
import type { SendMessageCommandInput } from '@aws-sdk/client-sqs';
import type { FramesIntegration } from './frames-integration.mjs';

/** The environment variable that turns the integration on: JSON of {@link FramesSettings}. */
export const FRAMES_VARIABLE: 'LAMBDACABLE_OFFLINE_FRAMES';

/** The close code API Gateway ends a connection with when its client sends a binary frame. */
export const BINARY_FRAME_CLOSE_CODE: 1003;

/** What {@link FRAMES_VARIABLE} holds. */
export interface FramesSettings {
  /** The frames FIFO queue. */
  readonly queueUrl: string;
  /** The local SQS endpoint (fauxqs), e.g. `http://127.0.0.1:41234`. */
  readonly endpoint: string;
  readonly region: string;
  /** The `$default` route's request template (FRAMES_REQUEST_TEMPLATE). */
  readonly template: string;
  /** The local services' dummy credentials. */
  readonly credentials: { readonly accessKeyId: string; readonly secretAccessKey: string };
}

/** The settings in the text of {@link FRAMES_VARIABLE}; throws naming what is missing. */
export function framesSettings(text: string): FramesSettings;

/** SendMessage through an SQS client of the local endpoint. */
export function sqsSender(
  settings: Pick<FramesSettings, 'endpoint' | 'region' | 'credentials'>,
): Promise<(input: SendMessageCommandInput) => Promise<unknown>>;

/**
 * Wraps serverless-offline's WebSocketClients so that its clients' text frames go to
 * `integration` (then to its own listener), binary frames close the connection with 1003, and
 * routes other than `$connect` and `$disconnect` are refused.
 */
export function hookWebSocketClients(
  WebSocketClients: abstract new (...args: never[]) => unknown,
  integration: Pick<FramesIntegration, 'receive'>,
  log?: (line: string) => void,
): void;

/** Turns the integration on from the text of {@link FRAMES_VARIABLE}; what went wrong, or undefined. */
export function hookFrames(
  text: string,
  WebSocketClients: abstract new (...args: never[]) => unknown,
  log?: (line: string) => void,
): Promise<string | undefined>;
