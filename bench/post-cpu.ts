import { spawn } from 'node:child_process';
import {
  ApiGatewayManagementApiClient,
  PostToConnectionCommand,
} from '@aws-sdk/client-apigatewaymanagementapi';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../infra/local/services';
import type { Figure } from './util';

/** Posts timed per setting (after a warm-up). */
const POSTS = 5_000;
/** Posts in flight: the fan-out's default concurrency. */
const CONCURRENCY = 50;

/** A management API that answers every post with 200, in a process of its own. */
const ANSWERING_SERVER = `
const server = require('node:http').createServer((req, res) => {
  req.resume();
  req.on('end', () => res.end());
});
server.listen(0, '127.0.0.1', () => process.send(server.address().port));
`;

/** The figures, and the best caller CPU per post with the functions' setting. */
export interface PostCpu {
  readonly figures: Figure[];
  readonly microsPerPost: number;
}

/**
 * The CPU one `PostToConnection` costs the caller (the broadcast function, per subscriber):
 * the SDK's middleware, SigV4 signing and the HTTP request, measured with `process.cpuUsage`
 * against a server in another process, with the SDK's `cacheMiddleware` off (its default) and
 * on (the functions' setting). On Lambda this CPU is billed duration: at 512 MB a function has
 * about 0.29 of a vCPU.
 */
export async function benchPostCpu(): Promise<PostCpu> {
  const server = spawn(process.execPath, ['-e', ANSWERING_SERVER], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  try {
    const port = await new Promise<number>((resolve, reject) => {
      server.once('message', (m) => resolve(m as number));
      server.once('exit', (code) => reject(new Error(`answering server exited (${code})`)));
    });
    const perPost = async (cacheMiddleware: boolean) => {
      const client = new ApiGatewayManagementApiClient({
        endpoint: `http://127.0.0.1:${port}`,
        region: LOCAL_REGION,
        credentials: LOCAL_CREDENTIALS,
        cacheMiddleware,
      });
      const data = new TextEncoder().encode('{"identifier":"{}","message":{"n":1}}');
      const post = (i: number) =>
        client.send(new PostToConnectionCommand({ ConnectionId: `c${i}`, Data: data }));
      try {
        for (let i = 0; i < 500; i++) await post(i);
        const before = process.cpuUsage();
        let next = 0;
        await Promise.all(
          Array.from({ length: CONCURRENCY }, async () => {
            while (next < POSTS) await post(next++);
          }),
        );
        const used = process.cpuUsage(before);
        return (used.user + used.system) / POSTS;
      } finally {
        client.destroy();
      }
    };
    // Alternated, so that neither setting gets the warmer process.
    const off: number[] = [];
    const on: number[] = [];
    for (let round = 0; round < 3; round++) {
      off.push(await perPost(false));
      on.push(await perPost(true));
    }
    const microsPerPost = Math.min(...on);
    const without = Math.min(...off);
    const figures = [
      {
        name: 'PostToConnection, caller CPU per post',
        value: `${Math.round(microsPerPost)} µs`,
        reference: `${Math.round(without)} µs without cacheMiddleware`,
        ratio: `${(microsPerPost / without).toFixed(2)}x`,
        extra:
          `best of 3 × ${POSTS} posts, ${CONCURRENCY} in flight; 1,000 subscribers cost the ` +
          `function ${((microsPerPost * 1000) / 1e6).toFixed(2)} s of CPU per broadcast`,
      },
    ];
    return { figures, microsPerPost };
  } finally {
    server.kill();
  }
}
