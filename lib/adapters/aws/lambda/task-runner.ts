import { InvokeCommand, type InvokeCommandOutput, type LambdaClient } from '@aws-sdk/client-lambda';
import { errorMessage } from '../../../kernel/errors.js';
import type {
  FanoutTask,
  FanoutTaskReport,
  FanoutTaskRunner,
} from '../../../realtime/fanout/ports.js';
import { TaskInvocationError } from '../../../realtime/fanout/tree.js';
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
 * Its failures say what became of the invocation ({@link TaskInvocationError}): refused
 * (`TooManyRequestsException`, or no connection made: `not-started`); the handler threw (a `FunctionError`:
 * `ended`, it waited for its sub-tasks); killed (`Sandbox.Timedout`, `Runtime.*`, `Task timed
 * out`: `unknown`, what it invoked may run on); no answer at all (`unknown`: it may still run). The
 * client must make one attempt (`maxAttempts: 1`): an SDK that sends an Invoke again after a
 * lost answer starts a second copy of a task that may still be running.
 */
export class LambdaTaskRunner implements FanoutTaskRunner {
  constructor(private readonly options: LambdaTaskRunnerOptions) {}

  async run(task: FanoutTask): Promise<FanoutTaskReport> {
    const { client, functionName } = this.options;
    const stream = task.message.stream;
    let out: InvokeCommandOutput;
    try {
      out = await awsCall('Invoke', functionName, [stream], () =>
        client.send(
          new InvokeCommand({
            FunctionName: functionName,
            Payload: new TextEncoder().encode(JSON.stringify(task)),
          }),
        ),
      );
    } catch (error) {
      const cause = (error as { cause?: unknown }).cause;
      // Refused by Lambda, or no connection made (nothing was sent): it never ran.
      const refused =
        nameOf(cause) === 'TooManyRequestsException' ||
        (cause as { code?: unknown } | undefined)?.code === 'ECONNREFUSED';
      throw new TaskInvocationError(
        errorMessage(error),
        refused ? 'not-started' : 'unknown',
        error,
      );
    }
    const text = out.Payload ? new TextDecoder().decode(out.Payload) : '';
    if (out.FunctionError) {
      const reason = reasonOf(text);
      // Killed (its timeout, out of memory, a crash): the tasks it invoked may run on.
      const killed = /^(Sandbox|Runtime)\.|Task timed out/.test(reason);
      throw new TaskInvocationError(
        `Invoke on ${functionName} failed for ${stream}: ${out.FunctionError}: ${reason}`,
        killed ? 'unknown' : 'ended',
      );
    }
    return JSON.parse(text) as FanoutTaskReport;
  }
}

/** An SDK error's name. */
function nameOf(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null
    ? String((error as { name?: unknown }).name)
    : undefined;
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
