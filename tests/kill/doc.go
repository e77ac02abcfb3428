// Package kill holds no code: its test proves that a store survives its
// process being killed. TestKillDuringWrites runs the mixed workload
// (tests/internal/workload) with synced writes in a child process (the
// test binary run again, told by an environment variable), kills it with
// SIGKILL after a random number of acknowledged operations, three times
// over one directory, and after each kill reopens the store and checks
// that every acknowledged write is there, versions are dense, outbox
// batches are whole and no message is lost. TestKillOnce does the same
// with a child enqueuing with idempotency keys (proctest.RunOnce): every
// acknowledged key holds its first sequence number, writing it again
// makes no second message, and the queue holds one message per key.
package kill
