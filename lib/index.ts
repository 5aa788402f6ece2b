/** Every public symbol of the library (the three entry points of the package together). */
export * from './aws.js';
export * from './core.js';
export * from './testing.js';
