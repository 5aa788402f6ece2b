// Bridges serverless.yml to the TypeScript definitions in infra/ (the one source of the
// tables, queues and roles): `${file(./infra/serverless.cjs):resources}` and `:environment`.
// The Serverless Framework loads .cjs files with require(), so tsx compiles the TypeScript.
const { require: tsxRequire } = require('tsx/cjs/api');

module.exports = async ({ resolveVariable }) => {
  const service = await resolveVariable('self:service');
  const stage = await resolveVariable('sls:stage');
  const prefix = `${service}-${stage}`;
  const cfn = tsxRequire('./cloudformation.ts', __filename);
  return {
    prefix,
    resources: cfn.cloudFormation({ prefix, functionName: (key) => `${prefix}-${key}` }),
    environment: localOverrides(cfn.functionEnvironment(prefix)),
  };
};

// `npm start` passes the local queue URLs (serverless-offline cannot resolve `Ref`).
function localOverrides(environment) {
  const out = { ...environment };
  for (const name of Object.keys(out)) {
    if (process.env[name]) out[name] = process.env[name];
  }
  return out;
}
