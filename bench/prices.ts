/**
 * AWS list prices the benchmarks price usage with: us-east-1, on demand, first tier, Lambda
 * on arm64, in US dollars. One place, so that every cost table (the delivery path here, the
 * pinger elsewhere) uses the same numbers; check the sources before relying on a figure.
 */

/** Price per unit of each billed dimension. */
export interface Prices {
  /** Per WebSocket message sent or received (billed in 32 KB increments). */
  readonly apiGatewayMessage: number;
  /** Per WebSocket connection-minute. */
  readonly apiGatewayConnectionMinute: number;
  /** Per HTTP API request (billed in 512 KB increments). */
  readonly httpApiRequest: number;
  /** Per Lambda request (invocation). */
  readonly lambdaRequest: number;
  /** Per GB-second of Lambda duration, arm64. */
  readonly lambdaGbSecond: number;
  /** Per DynamoDB write request unit (on demand; 1 KB, 2 per transactional write). */
  readonly dynamodbWriteUnit: number;
  /** Per DynamoDB read request unit (on demand; 4 KB consistent, 8 KB eventually consistent). */
  readonly dynamodbReadUnit: number;
  /** Per SQS FIFO request (each 64 KB chunk of a request is one request). */
  readonly sqsFifoRequest: number;
}

/** us-east-1 list prices. */
export const PRICES: Prices = {
  // https://aws.amazon.com/api-gateway/pricing/ (WebSocket APIs): $1.00 per million messages
  // for the first billion, 32 KB increments.
  apiGatewayMessage: 1.0 / 1e6,
  // Same page: $0.25 per million connection minutes.
  apiGatewayConnectionMinute: 0.25 / 1e6,
  // Same page (HTTP APIs): $1.00 per million requests for the first 300 million.
  httpApiRequest: 1.0 / 1e6,
  // https://aws.amazon.com/lambda/pricing/: $0.20 per million requests.
  lambdaRequest: 0.2 / 1e6,
  // Same page, Arm price, first 7.5 billion GB-seconds a month: $0.0000133334 per GB-second.
  lambdaGbSecond: 0.0000133334,
  // https://aws.amazon.com/dynamodb/pricing/on-demand/: $0.625 per million write request units.
  dynamodbWriteUnit: 0.625 / 1e6,
  // Same page: $0.125 per million read request units.
  dynamodbReadUnit: 0.125 / 1e6,
  // https://aws.amazon.com/sqs/pricing/: FIFO queues, $0.50 per million requests after the free
  // tier; every 64 KB chunk of a payload is billed as one request.
  sqsFifoRequest: 0.5 / 1e6,
};

/** How much of each billed dimension something uses; every field defaults to 0. */
export interface Usage {
  readonly apiGatewayMessages?: number;
  readonly apiGatewayConnectionMinutes?: number;
  readonly httpApiRequests?: number;
  readonly lambdaRequests?: number;
  /** Lambda duration × memory; see {@link gbSeconds}. */
  readonly lambdaGbSeconds?: number;
  readonly dynamodbWriteUnits?: number;
  readonly dynamodbReadUnits?: number;
  readonly sqsFifoRequests?: number;
}

/** Which price applies to which field of {@link Usage}. */
const PRICE_OF: Readonly<Record<keyof Usage, keyof Prices>> = {
  apiGatewayMessages: 'apiGatewayMessage',
  apiGatewayConnectionMinutes: 'apiGatewayConnectionMinute',
  httpApiRequests: 'httpApiRequest',
  lambdaRequests: 'lambdaRequest',
  lambdaGbSeconds: 'lambdaGbSecond',
  dynamodbWriteUnits: 'dynamodbWriteUnit',
  dynamodbReadUnits: 'dynamodbReadUnit',
  sqsFifoRequests: 'sqsFifoRequest',
};

/** The list price of `usage` in US dollars, per dimension and in total. */
export function costOf(
  usage: Usage,
  prices: Prices = PRICES,
): { readonly total: number; readonly by: Readonly<Record<keyof Usage, number>> } {
  const by = {} as Record<keyof Usage, number>;
  let total = 0;
  for (const [field, price] of Object.entries(PRICE_OF) as [keyof Usage, keyof Prices][]) {
    by[field] = (usage[field] ?? 0) * prices[price];
    total += by[field];
  }
  return { total, by };
}

/** GB-seconds of `ms` of Lambda duration at `memoryMb` (Lambda bills each 1 ms). */
export function gbSeconds(ms: number, memoryMb: number): number {
  return (Math.ceil(ms) / 1000) * (memoryMb / 1024);
}
