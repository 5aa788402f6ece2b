console.log(
  'lambdacable: the local stack (WebSocket gateway, relay, consumers) is not built yet.\n' +
    'What exists today is the library core; run `npm test` to see it work.',
);
