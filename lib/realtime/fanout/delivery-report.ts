import type { Subscription } from '../ports.js';

/** What a fan-out did. */
export interface DeliveryReport {
  /** Frames delivered. */
  sent: number;
  /** Connections that answered 410 (disconnected unless just connected: {@link disconnectGone}). */
  gone: string[];
  /**
   * Posts given up on: not throttled (not retried), or throttled again on every later pass.
   * `retried` counts the later passes made for it.
   */
  failed: { connectionId: string; error: unknown; retried: number }[];
  /** Posts made again on a later pass, after a first one failed (throttled, say). */
  retried: number;
}

/** Frames counted since the last {@link Fanout.takeCounts}: what a handler turns into metrics. */
export interface DeliveryCounts {
  /** Frames delivered. */
  delivered: number;
  /** Frames given up on after every later pass failed: each one is also logged. */
  undelivered: number;
  /** Posts made again on a later pass. */
  retried: number;
  /** Frames of a redelivered message (see `StreamMessage.meta.redelivered`): possible duplicates. */
  redelivered: number;
  /** Connections found gone (410). */
  gone: number;
}

/** Delivers frames to the subscribers of a stream: what the gateway needs of the fan-out (whispers). */
export interface StreamDelivery {
  /**
   * Posts `render(subscription)` to every subscriber of `stream` but those of `except`
   * (a connection id); `render` returning `undefined` skips a subscriber. With `retry`
   * false, a throttled post is not tried again in a later pass (a whisper is not worth the
   * wait).
   */
  deliver(
    stream: string,
    render: (sub: Subscription) => string | undefined,
    except?: string,
    options?: { readonly retry?: boolean },
  ): Promise<DeliveryReport>;
}
