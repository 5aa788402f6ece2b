/**
 * The request template of the WebSocket API's `$default` route: API Gateway's SQS
 * integration renders it for every client frame into a `SendMessage` call (the SQS Query
 * protocol, form-encoded) on the frames FIFO queue. The message group is the connection, so
 * one connection's frames are consumed in the order API Gateway sent them; the deduplication
 * id is the frame's request id, so a retried send is not a second frame. The body is the frame
 * as the client sent it. `npm start` renders this same text (infra/local/offline).
 */
export const FRAMES_REQUEST_TEMPLATE = [
  'Action=SendMessage',
  'MessageGroupId=$util.urlEncode($context.connectionId)',
  'MessageDeduplicationId=$util.urlEncode($context.requestId)',
  'MessageBody=$util.urlEncode($input.body)',
].join('&');
