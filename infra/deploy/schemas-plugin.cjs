// A Serverless Framework plugin: after `serverless deploy`, registers the schemas the functions
// encode with (infra/deploy/schemas.ts) in the stage's schemas table, with the deployer's
// credentials, so that no function's role needs to write the schema registry.
const { require: tsxRequire } = require('tsx/cjs/api');

class RegisterSchemasPlugin {
  constructor(serverless, _options, { log } = {}) {
    this.serverless = serverless;
    this.log = log;
    this.hooks = { 'after:deploy:deploy': () => this.register() };
  }

  async register() {
    const provider = this.serverless.getProvider('aws');
    const { DynamoDBClient } = require('@aws-sdk/client-dynamodb');
    const { registerSchemas } = tsxRequire('./schemas.ts', __filename);
    const { tableName } = tsxRequire('./names.ts', __filename);
    const table = tableName(`${this.serverless.service.service}-${provider.getStage()}`, 'schemas');
    const client = new DynamoDBClient(await provider.getAwsSdkV3Config());
    try {
      const ids = await registerSchemas(client, table);
      this.log?.notice?.(`lambdacable: schemas registered in ${table}: ${JSON.stringify(ids)}`);
    } finally {
      client.destroy();
    }
  }
}

module.exports = RegisterSchemasPlugin;
