import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import { AwsResourceError } from '../../../kernel/errors.js';
import type {
  FanoutTask,
  FanoutTaskReport,
  FanoutTaskRunner,
} from '../../../realtime/fanout/ports.js';
import { awsCall } from '../call.js';

/** Options of {@link LambdaTaskRunner}. */
export interface LambdaTaskRunnerOptions {
  readonly client: LambdaClient;
  /** The deployed name of the `deliver` function. */
  readonly functionName: string;
}

/**
 * Runs each fan-out task in an invocation of the `deliver` function (`Invoke`,
 * `RequestResponse`): the caller waits for its report, so a stream's frames stay in order.
 * A throttled invoke (`TooManyRequestsException`) posted nothing and is retried by the SDK; a
 * failed invocation (the handler threw, or timed out) rejects, and the caller runs it again.
 */
export class LambdaTaskRunner implements FanoutTaskRunner {
  constructor(private readonly options: LambdaTaskRunnerOptions) {}

  async run(task: FanoutTask): Promise<FanoutTaskReport> {
    const { client, functionName } = this.options;
    const stream = task.message.stream;
    const out = await awsCall('Invoke', functionName, [stream], () =>
      client.send(
        new InvokeCommand({
          FunctionName: functionName,
          Payload: new TextEncoder().encode(JSON.stringify(task)),
        }),
      ),
    );
    const text = out.Payload ? new TextDecoder().decode(out.Payload) : '';
    if (out.FunctionError) {
      throw new AwsResourceError(
        `Invoke on ${functionName} failed for ${stream}: ${out.FunctionError}: ${reasonOf(text)}`,
        { resource: functionName, ids: [stream] },
      );
    }
    return JSON.parse(text) as FanoutTaskReport;
  }
}

/** The error message of a failed invocation's payload (`{ errorMessage, errorType }`). */
function reasonOf(payload: string): string {
  try {
    const parsed = JSON.parse(payload) as { errorMessage?: unknown; errorType?: unknown };
    return `${String(parsed.errorType ?? 'Error')}: ${String(parsed.errorMessage ?? payload)}`;
  } catch {
    return payload;
  }
}
