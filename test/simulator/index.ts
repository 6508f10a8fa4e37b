export { startSimulator, type RecordedRequest, type Simulator, type SimulatorOptions } from './server.ts';
export { DEFAULT_OUTPUT_TOKENS, replyWords } from './plan.ts';
export { captureRaw, pushChunk, runMeter, splitAt, type MeterRun } from './capture.ts';
