import { pino, type Logger } from 'pino';

/** Header and field paths whose values never reach a log line. */
const REDACT = [
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'req.headers["api-key"]',
  'req.headers["x-goog-api-key"]',
  'headers.authorization',
  'headers["x-api-key"]',
  'headers["api-key"]',
  'headers["x-goog-api-key"]',
  'key_secret',
  'api_key',
  'bootstrap_admin_key',
  'nats_password',
  'nats_token',
  'webhook_secret',
];

/** pino JSON logs for one process; request-scoped children add `request_id`. */
export function createLogger(options: { level: string; service: string }): Logger {
  return pino({
    level: options.level,
    base: { service: options.service },
    redact: { paths: REDACT, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}
