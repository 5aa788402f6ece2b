import { processPartialResponse, SqsFifoPartialProcessorAsync } from '@aws-lambda-powertools/batch';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { forEachConcurrently } from '../../../kernel/concurrency.js';

/**
 * Runs `handler` over the event's records, a message group at a time per slot: each group's
 * records through Powertools' `SqsFifoPartialProcessorAsync` (one after another, the rest of
 * the group failed after a failure), `concurrency` groups at once. The failures come back in
 * the event's order.
 */
export async function processGroups(
  event: SQSEvent,
  handler: (record: SQSRecord) => Promise<void>,
  concurrency = Number.POSITIVE_INFINITY,
): Promise<SQSBatchResponse> {
  const groups = new Map<string, SQSRecord[]>();
  for (const record of event.Records) {
    const group = record.attributes.MessageGroupId ?? '';
    const list = groups.get(group);
    if (list) list.push(record);
    else groups.set(group, [record]);
  }
  const runs: SQSRecord[][] = concurrency <= 1 ? [event.Records] : [...groups.values()];
  const failed = new Set<string>();
  await forEachConcurrently(runs, Math.max(1, concurrency), async (records) => {
    const out = await processPartialResponse(
      { Records: records },
      handler,
      new SqsFifoPartialProcessorAsync(),
      { skipGroupOnError: true, throwOnFullBatchFailure: false },
    );
    for (const f of out.batchItemFailures) failed.add(f.itemIdentifier);
  });
  return {
    batchItemFailures: event.Records.filter((r) => failed.has(r.messageId)).map((r) => ({
      itemIdentifier: r.messageId,
    })),
  };
}
