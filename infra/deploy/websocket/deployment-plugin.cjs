// A Serverless Framework plugin: once the `resources` section is merged into the compiled
// template, the WebSocket stage's deployment also deploys the `$default` route that
// infra/deploy/websocket/frames.ts declares there (infra/deploy/websocket/deployment.ts says why).
const { require: tsxRequire } = require('tsx/cjs/api');

class DeployFramesRoutePlugin {
  constructor(serverless) {
    this.serverless = serverless;
    this.hooks = {
      'after:aws:package:finalize:mergeCustomProviderResources': () => this.deploy(),
    };
  }

  deploy() {
    const { deployFramesRoute } = tsxRequire('./deployment.ts', __filename);
    deployFramesRoute(this.serverless.service.provider.compiledCloudFormationTemplate);
  }
}

module.exports = DeployFramesRoutePlugin;
