/**
 * The fan-out floor: a bare `ws` WebSocketServer, run as its own process by the fan-out
 * bench (as serverless-offline is), speaking just enough `actioncable-v1-ext-json` for the
 * bench clients: `welcome` on connect, `confirm_subscription` on subscribe, and on
 * `POST /broadcast` (`{"stream","message"}`) one broadcast frame to every subscriber of the
 * stream, answered once every frame is handed to its socket. It reports its port over IPC.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { EXT_PROTOCOL } from './ws-clients';

interface Subscriber {
  readonly send: (frame: string) => void;
  readonly identifier: string;
}

const streams = new Map<string, Set<Subscriber>>();
let offset = 0;

const http = createServer((req, res) => {
  if (req.method !== 'POST' || req.url !== '/broadcast') {
    res.writeHead(404).end();
    return;
  }
  let body = '';
  req.on('data', (chunk: Buffer) => {
    body += chunk.toString();
  });
  req.on('end', () => {
    const { stream, message } = JSON.parse(body) as { stream: string; message: unknown };
    offset++;
    // One frame per subscription, as a broadcaster renders it with the subscription's identifier.
    for (const sub of streams.get(stream) ?? []) {
      sub.send(
        JSON.stringify({
          identifier: sub.identifier,
          message,
          stream_id: stream,
          epoch: 'floor',
          offset,
        }),
      );
    }
    res.writeHead(201).end();
  });
});

const wss = new WebSocketServer({
  server: http,
  handleProtocols: (protocols) => (protocols.has(EXT_PROTOCOL) ? EXT_PROTOCOL : false),
});
wss.on('connection', (ws) => {
  const mine: { stream: string; sub: Subscriber }[] = [];
  ws.send(JSON.stringify({ type: 'welcome', sid: `floor-${Math.random()}` }));
  ws.on('message', (data) => {
    const frame = JSON.parse(data.toString()) as { command?: string; identifier?: string };
    if (frame.command !== 'subscribe' || typeof frame.identifier !== 'string') return;
    const params = JSON.parse(frame.identifier) as { signed_stream_name?: string };
    const stream = String(params.signed_stream_name);
    const sub: Subscriber = { send: (f) => ws.send(f), identifier: frame.identifier };
    const subs = streams.get(stream) ?? new Set<Subscriber>();
    subs.add(sub);
    streams.set(stream, subs);
    mine.push({ stream, sub });
    ws.send(JSON.stringify({ type: 'confirm_subscription', identifier: frame.identifier }));
  });
  ws.on('close', () => {
    for (const { stream, sub } of mine) streams.get(stream)?.delete(sub);
  });
});

http.listen(0, '127.0.0.1', () => {
  process.send?.({ port: (http.address() as AddressInfo).port });
});
process.on('disconnect', () => process.exit(0));
