/** Sends frames to, and closes, WebSocket connections (API Gateway's management API in production). */
export interface ConnectionApi {
  /** Posts a text frame; `'gone'` when the connection no longer exists (HTTP 410). */
  post(connectionId: string, frame: string, endpoint?: string): Promise<'sent' | 'gone'>;
  /** Closes a connection; closing an unknown one is not an error. */
  close(connectionId: string, endpoint?: string): Promise<void>;
}
