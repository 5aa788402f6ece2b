/** A connection's frames, one after another: how the frames queue's batches are handled. */

/** One client frame as the frames queue delivers it. */
export interface QueuedFrame {
  /** The connection that sent it (the message group). */
  readonly connectionId: string;
  /** The frame as the client sent it. */
  readonly body: string;
}

/**
 * Hands `frames`, in the order the queue delivered them, to `receive`: one connection's one
 * after another in that order, each started when the one before it is done; different
 * connections' at the same time. Resolves when all are done; `receive` must not throw (the
 * gateway's never does), or the rest of that connection's frames are not handed over.
 */
export async function receiveInOrder(
  frames: readonly QueuedFrame[],
  receive: (connectionId: string, body: string) => Promise<void>,
): Promise<void> {
  const byConnection = new Map<string, QueuedFrame[]>();
  for (const frame of frames) {
    const list = byConnection.get(frame.connectionId);
    if (list) list.push(frame);
    else byConnection.set(frame.connectionId, [frame]);
  }
  await Promise.all(
    [...byConnection.values()].map(async (list) => {
      for (const frame of list) await receive(frame.connectionId, frame.body);
    }),
  );
}
