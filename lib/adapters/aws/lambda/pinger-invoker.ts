import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import { AwsResourceError } from '../../../kernel/errors.js';
import type { PartitionRun, PingerInvoker } from '../../../realtime/keepalive/ports.js';
import { awsCall } from '../call.js';

/** Options of {@link LambdaPingerInvoker}. */
export interface LambdaPingerInvokerOptions {
  readonly client: LambdaClient;
  /** The pinger function: the coordinator invokes itself. */
  readonly functionName: string;
}

/**
 * {@link PingerInvoker} over Lambda: an asynchronous `Invoke` (`InvocationType` `Event`) of
 * the pinger function with the partition's run as its event; Lambda queues it (202).
 */
export class LambdaPingerInvoker implements PingerInvoker {
  constructor(private readonly options: LambdaPingerInvokerOptions) {}

  async start(run: PartitionRun): Promise<void> {
    const { functionName } = this.options;
    const out = await awsCall('Invoke', functionName, [`partition ${run.partition}`], () =>
      this.options.client.send(
        new InvokeCommand({
          FunctionName: functionName,
          InvocationType: 'Event',
          Payload: new TextEncoder().encode(JSON.stringify(run)),
        }),
      ),
    );
    if (out.StatusCode !== 202) {
      throw new AwsResourceError(
        `Invoke on ${functionName} for partition ${run.partition}: status ${out.StatusCode}, expected 202`,
        { resource: functionName, ids: [`partition ${run.partition}`] },
      );
    }
  }
}
