import type { GrpcServiceHandlers } from '../server.ts';
import { notImplemented } from './not-implemented.ts';

/**
 * svc.checkpoint.v1.CheckpointService: the checkpoint and execution-context stores do not exist
 * yet (docs/grpc.md, "Not done"), so every method is authorized and then refused UNIMPLEMENTED.
 */
export function checkpointService(): GrpcServiceHandlers {
  return {
    SaveCheckpoint: notImplemented('SaveCheckpoint', 'checkpoints:write'),
    GetCheckpoint: notImplemented('GetCheckpoint', 'checkpoints:read'),
    ListCheckpoints: notImplemented('ListCheckpoints', 'checkpoints:read'),
    DeleteCheckpoint: notImplemented('DeleteCheckpoint', 'checkpoints:write'),
    ListCheckpointVersions: notImplemented('ListCheckpointVersions', 'checkpoints:read'),
    GetCheckpointVersion: notImplemented('GetCheckpointVersion', 'checkpoints:read'),
    QueryCheckpoints: notImplemented('QueryCheckpoints', 'checkpoints:read'),
    GetExecutionContext: notImplemented('GetExecutionContext', 'checkpoints:read'),
    UpdateExecutionContext: notImplemented('UpdateExecutionContext', 'checkpoints:write'),
  };
}
