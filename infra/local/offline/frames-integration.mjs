/**
 * The `$default` route's SQS integration, as `npm start` provides it (serverless-offline has
 * Lambda integrations only): every client frame is rendered through the route's request
 * template (infra/deploy/websocket/frames-template.ts) into a `SendMessage` call of the SQS
 * Query protocol, as API Gateway renders it, and sent on the frames FIFO queue. The local SQS
 * (fauxqs) speaks only the JSON protocol, so the rendered form is parsed into the SDK's
 * `SendMessageCommand` input and the caller's `send` performs it.
 *
 * Pure: no SDK, no socket. preload.mjs wires it into serverless-offline (frames-hook.mjs).
 */
import { randomUUID } from 'node:crypto';

/**
 * A frame that could not be sent on the queue (the template, the form or the send failed).
 * `frame` is what API Gateway sends the client when an integration fails.
 */
export class FramesIntegrationError extends Error {
  constructor(message, { connectionId, requestId, cause }) {
    super(message, { cause });
    this.name = 'FramesIntegrationError';
    /** The connection that sent the frame. */
    this.connectionId = connectionId;
    /** The frame's `$context.requestId`. */
    this.requestId = requestId;
  }

  /** The frame API Gateway sends the client for a failed integration. */
  get frame() {
    return internalServerErrorFrame(this.connectionId, this.requestId);
  }
}

/**
 * The frame API Gateway sends a client whose message's integration failed (serverless-offline's
 * own `sendError` sends the same fields, with a constant request id).
 */
export function internalServerErrorFrame(connectionId, requestId) {
  return JSON.stringify({ message: 'Internal server error', connectionId, requestId });
}

/**
 * `$util.urlEncode`: Java's `URLEncoder.encode(value, "UTF-8")`, which API Gateway runs. It
 * differs from `encodeURIComponent` in escaping `!'()~` and in writing a space as `+`; a lone
 * surrogate becomes `?` (`%3F`), the replacement of Java's UTF-8 encoder.
 */
export function urlEncode(value) {
  return encodeURIComponent(value.replace(LONE_SURROGATE, '?'))
    .replace(/[!'()~]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
    .replace(/%20/g, '+');
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * A Velocity reference: `$` and a dotted name (Velocity's identifiers take letters, digits,
 * `-` and `_`), with the arguments of a method call if one follows.
 */
const REFERENCE = /\$([A-Za-z][\w-]*(?:\.[A-Za-z][\w-]*)*)(\([^()]*\))?/y;

/**
 * Renders the subset of VTL the frames template uses: `$context.<name>` (a key of `context`,
 * dotted names such as `identity.sourceIp` included), `$input.body`, and
 * `$util.urlEncode(...)` of one of those two. Anything else VTL would read (another reference,
 * a `#` directive or comment, an escaped `\$`) throws, naming it and where it is: a template
 * the local stack cannot render must fail at startup, not send something else. An unknown
 * `$context` name throws too, where API Gateway would render it empty.
 */
export function renderRequestTemplate(template, { context, body }) {
  let out = '';
  let at = 0;
  for (;;) {
    const next = template.slice(at).search(/[$#]|\\(?=[$#])/);
    if (next < 0) return out + template.slice(at);
    out += template.slice(at, at + next);
    at += next;
    REFERENCE.lastIndex = at;
    const match = template[at] === '$' ? REFERENCE.exec(template) : null;
    if (!match) throw unsupported(template, at);
    const [whole, name, args] = match;
    // A call whose arguments hold a call: named with its text, the reference alone says little.
    if (template[at + whole.length] === '(') throw unsupported(template, at);
    if (name === 'util.urlEncode' && args !== undefined) {
      const inner = args.slice(1, -1).trim();
      REFERENCE.lastIndex = 0;
      const ref = REFERENCE.exec(inner);
      if (ref?.[0] !== inner || ref[2] !== undefined) throw unsupported(template, at, whole);
      out += urlEncode(value(ref[1], { context, body }, template, at, whole));
    } else {
      if (args !== undefined) throw unsupported(template, at, whole);
      out += value(name, { context, body }, template, at, whole);
    }
    at += whole.length;
  }
}

function value(name, { context, body }, template, at, whole) {
  if (name === 'input.body') return body;
  if (!name.startsWith('context.')) throw unsupported(template, at, whole);
  const key = name.slice('context.'.length);
  if (!Object.hasOwn(context, key)) {
    throw new Error(
      `unknown $context variable in the request template at ${at}: $context.${key} ` +
        `(the local stack knows ${Object.keys(context)
          .map((k) => `$context.${k}`)
          .join(', ')})`,
    );
  }
  return String(context[key]);
}

function unsupported(template, at, what = template.slice(at, at + 40)) {
  return new Error(
    `unsupported VTL in the request template at ${at}: ${what} (the local stack renders ` +
      '$context.<name>, $input.body and $util.urlEncode of either, nothing else)',
  );
}

/**
 * The `$context` of a client frame (eventType MESSAGE, route `$default`) as a flat map from
 * the names a template writes after `$context.`: the fields serverless-offline gives its own
 * WebSocket events (apiId, domainName, stage, sourceIp as it sets them), with a fresh request
 * id (equal to the extended one, as on API Gateway) and message id.
 */
export function messageContext({
  connectionId,
  connectedAt,
  requestTimeEpoch = Date.now(),
  newId = randomUUID,
}) {
  const requestId = newId();
  return {
    apiId: 'private',
    connectedAt: connectedAt ?? requestTimeEpoch,
    connectionId,
    domainName: 'localhost',
    eventType: 'MESSAGE',
    extendedRequestId: requestId,
    'identity.sourceIp': '127.0.0.1',
    messageDirection: 'IN',
    messageId: newId(),
    requestId,
    requestTime: clfTime(requestTimeEpoch),
    requestTimeEpoch,
    routeKey: '$default',
    stage: 'local',
  };
}

const MONTHS = 'Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec'.split(' ');

/** `$context.requestTime`: the CLF time, `dd/MMM/yyyy:HH:mm:ss +0000`. */
function clfTime(epochMs) {
  const d = new Date(epochMs);
  const two = (n) => String(n).padStart(2, '0');
  return (
    `${two(d.getUTCDate())}/${MONTHS[d.getUTCMonth()]}/${d.getUTCFullYear()}:` +
    `${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())} +0000`
  );
}

/**
 * Renders `template` once with a dummy frame and parses the result as {@link sendMessageInput}
 * does: throws what the local stack could not do with it. Run at startup.
 */
export function checkRequestTemplate(template) {
  const context = messageContext({ connectionId: 'check=+/', newId: () => 'check' });
  sendMessageInput(renderRequestTemplate(template, { context, body: '{"check":1}' }), 'check');
}

const ATTRIBUTE =
  /^MessageAttribute\.(\d+)\.(Name|Value\.StringValue|Value\.BinaryValue|Value\.DataType)$/;

/**
 * The `SendMessageCommand` input (SDK v3) of a rendered SQS Query protocol form:
 * `Action=SendMessage`, `MessageBody`, `MessageGroupId`, `MessageDeduplicationId`,
 * `DelaySeconds`, `MessageAttribute.N.Name` / `.Value.StringValue` / `.Value.BinaryValue`
 * (base64) / `.Value.DataType`; `Version` is ignored. The queue is the integration's
 * (`queueUrl`), as API Gateway's URI names it. Another action, a parameter given twice, or one
 * not listed here throws.
 */
export function sendMessageInput(formBody, queueUrl) {
  const params = new URLSearchParams(formBody);
  const seen = new Set();
  const input = { QueueUrl: queueUrl };
  const attributes = new Map();
  let action;
  for (const [key, value] of params) {
    if (seen.has(key)) throw new Error(`SQS parameter ${key} is given twice in ${formBody}`);
    seen.add(key);
    const attribute = ATTRIBUTE.exec(key);
    if (key === 'Action') action = value;
    else if (key === 'Version') continue;
    else if (['MessageBody', 'MessageGroupId', 'MessageDeduplicationId'].includes(key)) {
      input[key] = value;
    } else if (key === 'DelaySeconds') {
      if (!/^\d+$/.test(value)) throw new Error(`DelaySeconds is not a whole number: ${value}`);
      input.DelaySeconds = Number(value);
    } else if (attribute) {
      const [, n, field] = attribute;
      attributes.set(n, { ...attributes.get(n), [field]: value });
    } else {
      throw new Error(
        `unsupported SendMessage parameter: ${key} (the local integration sends MessageBody, ` +
          'MessageGroupId, MessageDeduplicationId, DelaySeconds and MessageAttribute.N)',
      );
    }
  }
  if (action !== 'SendMessage') {
    throw new Error(
      `unsupported SQS action: ${action ?? 'none'} (the local integration sends SendMessage only)`,
    );
  }
  if (input.MessageBody === undefined) throw new Error(`no MessageBody in ${formBody}`);
  if (attributes.size) input.MessageAttributes = messageAttributes(attributes);
  return input;
}

function messageAttributes(attributes) {
  const out = {};
  for (const [n, a] of [...attributes].sort(([x], [y]) => Number(x) - Number(y))) {
    const value = a['Value.StringValue'] ?? a['Value.BinaryValue'];
    if (a.Name === undefined || a['Value.DataType'] === undefined || value === undefined) {
      throw new Error(`MessageAttribute.${n} needs a Name, a Value.DataType and a value`);
    }
    out[a.Name] = { DataType: a['Value.DataType'] };
    if (a['Value.StringValue'] !== undefined) out[a.Name].StringValue = a['Value.StringValue'];
    if (a['Value.BinaryValue'] !== undefined) {
      out[a.Name].BinaryValue = Uint8Array.from(Buffer.from(a['Value.BinaryValue'], 'base64'));
    }
  }
  return out;
}

/**
 * The `$default` route's SQS integration: `receive` renders a client's frame through
 * `template` and hands the `SendMessage` input for `queueUrl` to `send`. A connection's frames
 * are sent one after another in the order received, as API Gateway forwards a socket's frames
 * (the ordering the frames queue's message groups keep); different connections do not wait for
 * each other. `receive` resolves once its frame is sent and rejects with a
 * {@link FramesIntegrationError} when it was not; the next frames are sent all the same.
 * The template is checked at once ({@link checkRequestTemplate}).
 */
export function framesIntegration({
  queueUrl,
  template,
  send,
  now = Date.now,
  newId = randomUUID,
}) {
  checkRequestTemplate(template);
  /** Per connection, the settled end of its chain of sends. */
  const chains = new Map();

  async function deliver(context, body) {
    try {
      const form = renderRequestTemplate(template, { context, body });
      await send(sendMessageInput(form, queueUrl));
    } catch (error) {
      throw new FramesIntegrationError(
        `frame ${context.requestId} of connection ${context.connectionId} was not sent to ` +
          `${queueUrl}: ${error instanceof Error ? error.message : String(error)}`,
        { connectionId: context.connectionId, requestId: context.requestId, cause: error },
      );
    }
  }

  return {
    receive(connectionId, body, { connectedAt } = {}) {
      // The context is the frame's arrival, not its turn to be sent.
      const context = messageContext({
        connectionId,
        connectedAt,
        requestTimeEpoch: now(),
        newId,
      });
      const previous = chains.get(connectionId) ?? Promise.resolve();
      // Forgotten once the last frame is sent, before its caller hears of it.
      const sent = previous
        .then(() => deliver(context, body))
        .finally(() => {
          if (chains.get(connectionId) === settled) chains.delete(connectionId);
        });
      const settled = sent.then(
        () => {},
        () => {},
      );
      chains.set(connectionId, settled);
      return sent;
    },
    get pending() {
      return chains.size;
    },
  };
}
