// Bridges serverless.yml to the TypeScript definitions in infra/deploy/ (the one source of the
// tables, queues, roles, consumer functions and alarms): `${file(./infra/deploy/serverless.cjs):resources}`,
// `:environment`, `:consumerFunctions` and `:secretEnvironment.<function>`.
// The Serverless Framework loads .cjs files with require(), so tsx compiles the TypeScript.
const { require: tsxRequire } = require('tsx/cjs/api');

module.exports = async ({ resolveVariable }) => {
  const service = await resolveVariable('self:service');
  const stage = await resolveVariable('sls:stage');
  const settings = await resolveVariable('self:custom.lambdacable.environment');
  const prefix = `${service}-${stage}`;
  const alarms = await resolveVariable('self:custom.alarms');
  const { cloudFormation } = tsxRequire('./template/cloudformation.ts', __filename);
  const { consumerFunctions, functionEnvironment } = tsxRequire(
    './template/function-settings.ts',
    __filename,
  );
  const { functionSecrets } = tsxRequire('./template/roles.ts', __filename);
  // The consumer groups of this deployment, read once (LAMBDACABLE_EXAMPLE_CONSUMER).
  const groups = tsxRequire('./consumers.ts', __filename).consumerGroupsFor(process.env);
  const { monitoringSettings } = tsxRequire('./monitoring/settings.ts', __filename);
  const throttles = await resolveVariable('self:custom.throttling');
  const { stageExtensions, throttleSettings } = tsxRequire('./throttling.ts', __filename);
  const secretsModule = tsxRequire('./secrets.ts', __filename);
  const secrets = secretsModule.secretParameters(await resolveVariable('self:custom.secrets'));
  // A deploy gets each secret's parameter name, never its value; only `serverless offline`
  // (npm start, where nothing reads SSM) hands the functions the values of its environment.
  const offline = secretsModule.isOfflineCommand(process.argv.slice(2));
  if (!offline) warnOfSecretValues(secretsModule.SECRET_KEYS);
  const environment = { ...localOverrides(functionEnvironment(prefix, groups)), ...settings };
  // Source maps are shipped only when asked for (LAMBDACABLE_SOURCEMAPS=true, as the
  // esbuild section reads it), and only then are they worth Node's slower stack traces.
  if (process.env.LAMBDACABLE_SOURCEMAPS === 'true')
    environment.NODE_OPTIONS = '--enable-source-maps';
  // Tests of the local stack record every AWS call (lib/adapters/aws/call-log.ts); never deployed.
  if (process.env.LAMBDACABLE_AWS_CALL_LOG) {
    environment.LAMBDACABLE_AWS_CALL_LOG = process.env.LAMBDACABLE_AWS_CALL_LOG;
  }
  return {
    prefix,
    resources: {
      ...cloudFormation({
        prefix,
        stage,
        functionName: (key) => `${prefix}-${key}`,
        consumerGroups: groups,
        monitoring: monitoringSettings(alarms),
        secrets,
      }),
      // Stage throttling of $connect, $default and POST /_broadcast (infra/deploy/throttling.ts).
      extensions: stageExtensions(throttleSettings(throttles)),
    },
    environment,
    // The functions of the consumer groups (infra/deploy/consumers.ts), merged into
    // serverless.yml's `functions`.
    consumerFunctions: consumerFunctions(groups),
    // Each function's secret variables: `…_PARAM` names deployed, values under offline.
    secretEnvironment: Object.fromEntries(
      ['wsConnect', 'wsDefault', 'httpBroadcast'].map((key) => [
        key,
        secretsModule.secretEnvironment(
          functionSecrets(key, groups),
          secrets,
          offline ? process.env : undefined,
        ),
      ]),
    ),
  };
};

// Secret values in the deploy environment are not deployed (they used to be): say so.
function warnOfSecretValues(keys) {
  const set = Object.values(keys).filter((name) => process.env[name]);
  if (set.length === 0) return;
  process.stderr.write(
    `lambdacable: ${set.join(', ')} ${set.length === 1 ? 'is' : 'are'} set but not deployed: ` +
      'the functions read secrets from SSM Parameter Store or Secrets Manager (docs/configuration.md, "Secrets")\n',
  );
}

// `npm start` passes the local queue URLs (serverless-offline cannot resolve `Ref`).
function localOverrides(environment) {
  const out = { ...environment };
  for (const name of Object.keys(out)) {
    if (process.env[name]) out[name] = process.env[name];
  }
  return out;
}
