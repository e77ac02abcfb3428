// Package crash holds no code: its tests prove that a store survives a
// crash at any point, on Pebble's crashable in-memory file system
// (vfs.NewCrashableMem, cloned at a random point with a random part of
// what was not synced kept):
//
//   - TestCrashBatchesAtomic: every Update is all or nothing, the ones
//     that survive are a prefix of those acknowledged, and with synced
//     writes every acknowledged one survives;
//   - TestCrashWorkload: the mixed workload (tests/internal/workload)
//     checks out after the crash, and after running on from what was
//     recovered (versions and sequence numbers continue correctly);
//   - TestCrashQueueCount: a queue's stored count agrees with the messages
//     it holds after the crash, and internal/check agrees.
//
// Each test prints its seeds; replay one with
// go test ./tests/crash -run TestName -crash.seed N.
package crash
