/** The `$default` route's SQS integration as `npm start` provides it (frames-integration.mjs). */
import type { SendMessageCommandInput } from '@aws-sdk/client-sqs';

/** The `$context` of a frame, by the name a template writes after `$context.`. */
export type MessageContext = Readonly<Record<string, string | number>>;

/** A frame that could not be sent on the queue; `frame` is what the client is sent for it. */
export class FramesIntegrationError extends Error {
  constructor(
    message: string,
    fields: { connectionId: string; requestId: string; cause?: unknown },
  );
  /** The connection that sent the frame. */
  readonly connectionId: string;
  /** The frame's `$context.requestId`. */
  readonly requestId: string;
  /** The frame API Gateway sends the client for a failed integration. */
  get frame(): string;
}

/** The frame API Gateway sends a client whose message's integration failed. */
export function internalServerErrorFrame(connectionId: string, requestId: string): string;

/** `$util.urlEncode`: Java's `URLEncoder.encode(value, "UTF-8")`. */
export function urlEncode(value: string): string;

/**
 * Renders `$context.<name>`, `$input.body` and `$util.urlEncode` of either; throws on any
 * other VTL and on an unknown `$context` name.
 */
export function renderRequestTemplate(
  template: string,
  frame: { context: MessageContext; body: string },
): string;

/** The `$context` of a client frame on the `$default` route (eventType MESSAGE). */
export function messageContext(options: {
  connectionId: string;
  /** When the connection was opened. @default requestTimeEpoch */
  connectedAt?: number;
  /** When the frame arrived. @default Date.now() */
  requestTimeEpoch?: number;
  /** Makes the request and message ids. @default crypto.randomUUID */
  newId?: () => string;
}): MessageContext;

/** Renders and parses `template` once with a dummy frame; throws what the local stack cannot do. */
export function checkRequestTemplate(template: string): void;

/** The `SendMessageCommand` input of a rendered SQS Query protocol form, for `queueUrl`. */
export function sendMessageInput(
  formBody: string,
  queueUrl: string,
): SendMessageCommandInput & { QueueUrl: string; MessageBody: string };

/** What {@link framesIntegration} is built from. */
export interface FramesIntegrationOptions {
  /** The frames FIFO queue, the one the integration's URI names. */
  readonly queueUrl: string;
  /** The route's request template (FRAMES_REQUEST_TEMPLATE). */
  readonly template: string;
  /** Performs one SendMessage; its rejection fails the frame. */
  readonly send: (input: SendMessageCommandInput) => Promise<unknown>;
  /** The clock of `$context.requestTimeEpoch`. @default Date.now */
  readonly now?: () => number;
  /** Makes the request and message ids. @default crypto.randomUUID */
  readonly newId?: () => string;
}

/** The `$default` route's SQS integration. */
export interface FramesIntegration {
  /**
   * Sends a client's text frame on the queue after the frames that connection sent before it;
   * rejects with a {@link FramesIntegrationError} when it was not sent.
   */
  receive(connectionId: string, body: string, connection?: { connectedAt?: number }): Promise<void>;
  /** Connections with frames not yet sent. */
  readonly pending: number;
}

/** The integration; throws at once when `template` cannot be rendered locally. */
export function framesIntegration(options: FramesIntegrationOptions): FramesIntegration;
