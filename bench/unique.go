package main

import (
	"fmt"
	"path/filepath"
)

// The unique section pairs tipkv's queue with River (github.com/riverqueue/river
// on SQLite) on what River offers beside a plain insert: a unique insert,
// where a job whose unique key is already held is not inserted again
// (issue 27's EnqueueOnce). Per-key ordered groups have no row: River's
// open-source release has none (its sequences are River Pro's), and
// neither has tipkv's queue.

const sysRiver = "River"

// The sides of one paired run of the insert rows: both systems' plain and
// unique inserts interleave in the same rounds, so a row compares tipkv
// with River and, from the same rounds, each system's unique insert with
// its own plain one.
const (
	sideTipkvOnce   = "tipkv once"
	sideRiverUnique = "River unique"
	sideTipkvDone   = "tipkv until-done"
	sideTipkvLatest = "tipkv hot Latest"
)

type uniqueResult struct {
	table *table
}

func runUnique(cfg config, parent string) (*uniqueResult, error) {
	t := &table{title: fmt.Sprintf("Unique inserts: tipkv's queue and River on SQLite, %d-byte items", cfg.ValueSize),
		systems: []string{sysTipkv, sysRiver}}
	var keyNotes []string
	for _, synced := range []bool{false, true} {
		notes, err := uniqueRows(cfg, parent, synced, t)
		if err != nil {
			return nil, err
		}
		keyNotes = append(keyNotes, notes...)
	}
	t.notes = append(t.notes,
		"tipkv: one DB per mode; insert is queue.Enqueue (one Update), insert once is queue.EnqueueOnce with a new key and tipkv.Window(1h), "+
			"a hundred of them in one DB.Update; a duplicate is EnqueueOnce of a key already held (Window(1h); the rows marked until-done: tipkv.UntilDone()), which reads and writes nothing. "+
			"River v0.51.2, riversqlite v0.51.2 on modernc.org/sqlite v1.62.0: an insert-only client (no queues, no workers), "+
			"one SQLite file in WAL mode, one connection, the run's cache budget (cache_size); insert is Client.Insert (its own transaction), "+
			"a hundred are one InsertMany (one transaction, one INSERT ... SELECT FROM json_each); a job's args are JSON (the value base64), "+
			"unique is InsertOpts.UniqueOpts{ByArgs: true} on args whose key field is tagged river:\"unique\" (the key is hashed, the value travels) "+
			"in River's default unique states; a duplicate is such an insert of a key already held, which River answers with an upsert that "+
			"rewrites the existing row (ON CONFLICT DO UPDATE ... RETURNING) and reports UniqueSkippedAsDuplicate. "+
			"Unsynced: tipkv NoSync, SQLite synchronous=OFF (neither syncs). Synced: tipkv's default (each commit waits for Pebble's WAL sync), "+
			"SQLite synchronous=FULL (each commit syncs the WAL). Every call checks its result (a new job, a duplicate found).",
		"Groups: River's open-source release has no per-key ordered groups (its sequences, which run a key's jobs one at a time in order, are River Pro, not available here), "+
			"and tipkv's queue has none either, so no grouped row.")
	t.notes = append(t.notes, keyNotes...)
	t.notes = append(t.notes, cfg.method())
	return &uniqueResult{table: t}, nil
}

// uniqueRows opens new stores for one durability mode, measures inserts of
// 1 and EnqueueBatch per commit, plain and unique, and duplicates, adds
// their rows to t and returns the notes of what a key costs each system.
func uniqueRows(cfg config, parent string, synced bool, t *table) ([]string, error) {
	mode := "unique"
	if synced {
		mode = "unique-synced"
	}
	dupValue := newValueGen(cfg.Seed+40, cfg.ValueSize).next(1)[0]
	tk, err := openTipkvUnique(filepath.Join(parent, mode+"-tipkv"), cfg, synced, dupValue)
	if err != nil {
		return nil, fmt.Errorf("tipkv: %w", err)
	}
	defer tk.close()
	rv, err := openRiver(filepath.Join(parent, mode+"-river"), cfg, synced)
	if err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	defer rv.close()
	if err := rv.insertUnique([]string{"dup"}, [][]byte{dupValue}, false); err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}

	suffix, quiet := "", cfg.WriteQuiet
	if synced {
		suffix, quiet = ", synced", 0 // wall time, and nothing in the background worth the wait
	}
	// calls is how many calls of per items an insert chunk makes.
	calls := func(per int) int {
		if synced {
			return cfg.SyncChunk
		}
		return max(cfg.UniqueItems/per, 1)
	}
	n := 0 // keys made so far: every key of the mode is new, across sides and rows
	// chunk returns a side whose chunks make calls(per) calls of per items
	// each, the items and keys made before the timing starts.
	chunk := func(name string, per int, seed uint64, call func(keys []string, items [][]byte) error) side {
		gen := newValueGen(seed, cfg.ValueSize)
		return side{system: name, chunk: func() (float64, error) {
			c := calls(per)
			items := gen.next(c * per)
			keys := make([]string, c*per)
			for i := range keys {
				n++
				keys[i] = fmt.Sprintf("key-%09d", n)
			}
			return timeChunk(func() (int, error) {
				for i := range c {
					if err := call(keys[i*per:(i+1)*per], items[i*per:(i+1)*per]); err != nil {
						return i * per, err
					}
				}
				return c * per, nil
			}, quiet, synced)
		}}
	}

	var notes []string
	for _, per := range []int{1, cfg.EnqueueBatch} {
		sides := []side{
			chunk(sysTipkv, per, cfg.Seed+41, func(_ []string, items [][]byte) error { return tk.enqueue(items) }),
			chunk(sideTipkvOnce, per, cfg.Seed+42, tk.enqueueOnce),
			chunk(sysRiver, per, cfg.Seed+43, func(_ []string, items [][]byte) error { return rv.insert(items) }),
			chunk(sideRiverUnique, per, cfg.Seed+44, func(keys []string, items [][]byte) error { return rv.insertUnique(keys, items, false) }),
		}
		op := fmt.Sprintf("insert, %d per commit%s", per, suffix)
		progress("unique: %s, plain and unique", op)
		r, err := runPaired(sides, cfg.writePlan())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		t.addPaired("", op, "ns/item", r.pair(sysTipkv, sysRiver, sysTipkv, sysRiver), synced)
		t.addPaired("", fmt.Sprintf("insert once (a new key), %d per commit%s", per, suffix), "ns/item",
			r.pair(sideTipkvOnce, sideRiverUnique, sysTipkv, sysRiver), synced)
		notes = append(notes, fmt.Sprintf("What a new key costs, %d per commit%s, from the same %d rounds: tipkv EnqueueOnce / Enqueue %s (issue 27's target: at most 1.3); "+
			"River unique / plain insert %s.",
			per, suffix, r.rounds, r.pair(sideTipkvOnce, sysTipkv, "", "").ratio(sysTipkv), r.pair(sideRiverUnique, sysRiver, "", "").ratio(sysRiver)))
	}

	// Duplicates: every call finds the key its store already holds. A
	// tipkv duplicate is a read and River's a write, far apart in cost, so
	// an unsynced chunk is an amount of CPU time (cfg.Chunk), not of calls.
	dup := func(name string, call func() error) side {
		pos := 0
		body := forDuration(func(int) error { return call() }, &pos, cfg.Chunk)
		if synced {
			body = func() (int, error) {
				for i := range cfg.SyncChunk {
					if err := call(); err != nil {
						return i, err
					}
				}
				return cfg.SyncChunk, nil
			}
		}
		return side{system: name, chunk: func() (float64, error) { return timeChunk(body, quiet, synced) }}
	}
	dupKeys, dupItems := []string{"dup"}, [][]byte{dupValue}
	sides := []side{
		dup(sysTipkv, func() error { return tk.duplicate(false, dupValue) }),
		dup(sideTipkvDone, func() error { return tk.duplicate(true, dupValue) }),
		dup(sysRiver, func() error { return rv.insertUnique(dupKeys, dupItems, true) }),
	}
	if !synced {
		// Issue 27's baseline, in CPU time: a tipkv duplicate commits
		// nothing, so syncing changes nothing of it.
		sides = append(sides, dup(sideTipkvLatest, tk.latest))
	}
	op := "insert once, a duplicate key" + suffix
	progress("unique: %s", op)
	r, err := runPaired(sides, cfg.writePlan())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	t.addPaired("", op, "ns/op", r.pair(sysTipkv, sysRiver, sysTipkv, sysRiver), synced)
	t.addPaired("", "insert once, a duplicate key (tipkv until-done)"+suffix, "ns/op", r.pair(sideTipkvDone, sysRiver, sysTipkv, sysRiver), synced)
	if !synced {
		notes = append(notes, fmt.Sprintf("A duplicate, from the same %d rounds: tipkv EnqueueOnce of a held key / a hot Latest %s with Window, %s with UntilDone "+
			"(issue 27's target: at most 1.1).",
			r.rounds, r.pair(sysTipkv, sideTipkvLatest, "", "").ratio(sideTipkvLatest), r.pair(sideTipkvDone, sideTipkvLatest, "", "").ratio(sideTipkvLatest)))
	}
	return notes, nil
}
