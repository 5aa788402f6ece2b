import { DynamoRateLimiter } from '../../lib/aws';
import { rateLimiterContract } from '../contract/rate-limit';
import { testResources } from '../helpers/aws';

let shared: ReturnType<typeof testResources> | undefined;
const resources = () => {
  shared ??= testResources('rate');
  return shared;
};

rateLimiterContract('DynamoRateLimiter', async (limit) => {
  const res = await resources();
  return new DynamoRateLimiter({ client: res.dynamodb, tableName: res.tables.connections, limit });
});
