// Package cli is the tipkv command, which inspects and maintains a tipkv
// store without writing Go, as a library: Main runs a command line. The
// binary is module github.com/tipkv/tipkv/cmd/tipkv, which registers
// etcdkv's and sqlkv's stores (Options.Engines) beside Pebble directories,
// so that STORE below is a directory, a PostgreSQL DSN or etcd endpoints.
//
//	tipkv stats   DIR [--no-scan]              families, collections, streams, queues, LSM shape, engine figures
//	tipkv dump    DIR [--family F] [--prefix P] [--hex] [-n N]
//	tipkv history DIR COLLECTION ID [-n N] [--as-of V]
//	tipkv feed    DIR STREAM [-n N] [--since T]
//	tipkv groups  STORE [STREAM] [--max N]     consumer groups (every one without STREAM): lags, pending counts and ages
//	tipkv tail    STORE STREAM [-n N] [--since T]  events as they commit, until interrupted
//	tipkv queue   DIR NAME [-n N] [--dead] [--requeue SEQS|all] [--discard SEQS|all]
//	tipkv check   DIR [--raw NAMES] [--max N]  exit status 1 when the store is not healthy
//	tipkv compact DIR                          family by family, with progress on stderr
//	tipkv backup  DIR DEST                     a checkpoint of the store: a store of its own
//	tipkv web     STORE [--addr A] [--actions] the web console (package console), until interrupted
//	tipkv version                              module version, store formats it reads
//
// Every command takes --help and --json, and flags may come before or after
// the arguments ("--" ends them). Every command but compact and queue
// --requeue or --discard opens the store read-only and changes nothing in
// its directory (backup writes only its DEST). No command creates a store:
// a missing or empty DIR is refused with exit status 2. A store held by
// another process is refused with a message that says so: Pebble locks the
// directory even for readers, so the
// commands run while the service that owns the store is stopped, or on a
// copy of its store that the service made with DB.Checkpoint while it runs.
//
// Tables are for people; --json writes one JSON document for scripts (dump
// writes one JSON object per line, so that a large store streams). Values
// are decoded from msgpack into JSON: bin values (Go []byte) become base64
// strings, maps keep their encoded field order. A value that is not msgpack
// but is JSON (stored with codec.JSON) is shown as it is, marked
// "value_encoding": "json" in --json output; a value that is neither is
// shown as hex. (A JSON number of one digit is also a whole msgpack value,
// and shows as msgpack.) Key segments that are not UTF-8 become
// {"hex": "..."} in JSON and Go-quoted strings in tables.
//
// Exit status: 0 when the command did what was asked (for check: the store
// is healthy), 1 when it failed or check found problems, 2 on bad usage or
// when the store cannot be opened.
//
// Errors are a line of text on stderr ("tipkv CMD: message"). With --json
// an error is instead one JSON object on one line of stderr, with the same
// exit status, and stdout holds only what was written before the failure
// (nothing, but for dump's records so far):
//
//	{"error":"/srv/shop: the store is in use by another process ...","kind":"in_use","command":"stats","exit_status":2}
//
// kind is one of: usage (bad usage, 2), in_use (another process has the
// store open, 2), no_store (the directory is missing or empty, 2),
// not_a_store (not a tipkv store, or a newer format, 2), corrupt (stored
// data that does not read or decode, 2 when the store cannot be opened,
// else 1), open (the store did not open for another reason, 2), not_found
// (no such document, stream or queue, 1), failed (anything else, 1).
// check's verdict on an unhealthy store is its report on stdout, not an
// error. compact's progress lines on stderr come before the error line.
package cli
