import { defineConfig } from 'vitest/config';

/** Every project's timeouts: the integration and e2e tests start processes. */
const timeouts = { testTimeout: 30_000, hookTimeout: 120_000 };

/**
 * Three projects: `vitest run --project unit` (npm run test:unit) starts no emulator; a plain
 * `vitest run` (npm test) runs them all. Vitest runs a global setup once per project that has
 * it (and the root's on every run, so the root has none): only `integration` has the emulators'
 * setup, so DynamoDB Local and fauxqs start once per run. The e2e tests start whole stacks of
 * their own (`startLocalStack`, `npm start`) and read no endpoint from it.
 */
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          // The deploy tests run `serverless package` offline: no emulator either.
          include: ['test/unit/**/*.test.ts', 'test/deploy/**/*.test.ts'],
          ...timeouts,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/global-setup.ts'],
          ...timeouts,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          ...timeouts,
        },
      },
    ],
  },
});
