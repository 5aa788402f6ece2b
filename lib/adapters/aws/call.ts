import { AwsResourceError } from '../../kernel/errors.js';

/**
 * Runs one SDK call (already retried by the SDK's retry strategy) and turns its failure
 * into an {@link AwsResourceError} naming the operation, resource and ids.
 */
export async function awsCall<T>(
  operation: string,
  resource: string,
  ids: readonly string[],
  fn: () => Promise<T>,
): Promise<T> {
  try {
    return await fn();
  } catch (cause) {
    const reason = cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause);
    throw new AwsResourceError(
      `${operation} on ${resource} failed for ${ids.join(', ')}: ${reason}`,
      {
        resource,
        ids,
        cause,
      },
    );
  }
}
