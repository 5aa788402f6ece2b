import { DynamoPresenceStore } from '../../lib/aws';
import { presenceStoreContract } from '../contract/presence';
import { testResources } from '../helpers/aws';

let shared: ReturnType<typeof testResources> | undefined;
const resources = () => {
  shared ??= testResources('presence');
  return shared;
};

presenceStoreContract('DynamoPresenceStore', async () => {
  const res = await resources();
  return new DynamoPresenceStore({ client: res.dynamodb, tableName: res.tables.connections });
});
