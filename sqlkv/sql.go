package sqlkv

import (
	"fmt"
	"strings"
)

// queries are the statements of one table, built once at Open. Every read
// is bounded on both sides of k, so the primary-key index answers it
// without a sort (bytea orders as bytes.Compare); Last is a backward
// index scan.
type queries struct {
	get       string
	pageFrom  string // k >= $1 AND k < $2 ORDER BY k LIMIT $3
	pageAfter string // k >  $1 AND k < $2 ORDER BY k LIMIT $3
	last      string

	set      string // one upsert
	setMany  string // a run of upserts of distinct keys
	insert   string // a Set that also checks its key absent (23505)
	del      string
	delMany  string
	delRange string

	present     string // 1/count(*): 22012 when the condition fails
	presentLock string // the same, locking the row for update (the batch writes it)
	equals      string
	equalsLock  string
	rangeEmpty  string
	rangesEmpty string // several ranges in one statement
	absent      string // placeholder rows (v NULL) that hold absent keys
	absentMany  string
	cleanup     string // drop the placeholders the batch did not overwrite
	advisory    string // prefix locks, shared or exclusive, in one statement
	giveWay     string // 22012 when a writer lock (lock.go) is held or waited for
	lockTable   string
	notify      string
	size        string
	vacuum      string
	status      string
	createTable string
	tableExists string
}

// autovacuumOptions keep the table small under insert/delete churn (a
// queue, an outbox): vacuum after a fixed number of dead rows rather than
// a fraction of the table (the table also holds every document, and 20%
// of a large table is millions of dead queue rows), at full speed, and
// analyze as often. Issue 17 measured the seed article's loop (insert
// 1,000, delete 1,000): with the server's defaults the table reached 646
// MiB plus a 150 MiB index for about 1,000 live rows; with per-table
// settings of this kind and autovacuum_naptime = 1s, 29-40 MiB, flat.
// Here (TestChurnTableSize, 1,500 rounds, naptime 1s) these settings held
// a peak of 41 MiB on an otherwise empty table, where the defaults, with
// the same naptime, held 28 MiB: on a small table the naptime does the
// work; the fixed thresholds are for a table that also holds many live
// rows. The naptime is a server setting (postgresql.conf): see the README.
// fillfactor leaves room on each page so that rewriting a value (a queue
// item's lease) is a HOT update that touches no index.
const autovacuumOptions = `fillfactor = 90,
	autovacuum_vacuum_scale_factor = 0,
	autovacuum_vacuum_threshold = 1000,
	autovacuum_vacuum_insert_scale_factor = 0,
	autovacuum_vacuum_insert_threshold = 1000,
	autovacuum_analyze_scale_factor = 0,
	autovacuum_analyze_threshold = 1000,
	autovacuum_vacuum_cost_delay = 0`

func newQueries(t string, d Dialect) queries {
	q := queries{
		get:       `SELECT v FROM ` + t + ` WHERE k = $1`,
		pageFrom:  `SELECT k, v FROM ` + t + ` WHERE k >= $1 AND k < $2 ORDER BY k LIMIT $3`,
		pageAfter: `SELECT k, v FROM ` + t + ` WHERE k > $1 AND k < $2 ORDER BY k LIMIT $3`,
		last:      `SELECT k, v FROM ` + t + ` WHERE k >= $1 AND k < $2 ORDER BY k DESC LIMIT 1`,

		set:      `INSERT INTO ` + t + ` (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v`,
		setMany:  `INSERT INTO ` + t + ` (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[]) ON CONFLICT (k) DO UPDATE SET v = excluded.v`,
		insert:   `INSERT INTO ` + t + ` (k, v) VALUES ($1, $2)`,
		del:      `DELETE FROM ` + t + ` WHERE k = $1`,
		delMany:  `DELETE FROM ` + t + ` WHERE k = ANY($1::bytea[])`,
		delRange: `DELETE FROM ` + t + ` WHERE k >= $1 AND k < $2`,

		present:     `SELECT 1/count(*) FROM (SELECT 1 FROM ` + t + ` WHERE k = $1 FOR KEY SHARE) s`,
		presentLock: `SELECT 1/count(*) FROM (SELECT 1 FROM ` + t + ` WHERE k = $1 FOR UPDATE) s`,
		equals:      `SELECT 1/count(*) FROM (SELECT v FROM ` + t + ` WHERE k = $1 FOR SHARE) s WHERE s.v = $2`,
		equalsLock:  `SELECT 1/count(*) FROM (SELECT v FROM ` + t + ` WHERE k = $1 FOR UPDATE) s WHERE s.v = $2`,
		rangeEmpty:  `SELECT 1/(1 - count(*)) FROM (SELECT 1 FROM ` + t + ` WHERE k >= $1 AND k < $2 LIMIT 1) s`,
		rangesEmpty: `SELECT 1/(NOT EXISTS (SELECT 1 FROM unnest($1::bytea[], $2::bytea[]) AS r(lo, hi) ` +
			`WHERE EXISTS (SELECT 1 FROM ` + t + ` WHERE k >= r.lo AND k < r.hi)))::int`,
		absent:     `INSERT INTO ` + t + ` (k) VALUES ($1)`,
		absentMany: `INSERT INTO ` + t + ` (k) SELECT unnest($1::bytea[])`,
		cleanup:    `DELETE FROM ` + t + ` WHERE k = ANY($1::bytea[]) AND v IS NULL`,
		advisory: `SELECT count(CASE WHEN u.x THEN pg_advisory_xact_lock(u.id)::text ELSE pg_advisory_xact_lock_shared(u.id)::text END) ` +
			`FROM unnest($1::int8[], $2::bool[]) WITH ORDINALITY AS u(id, x, n)`,
		giveWay: `SELECT 1/bool_and(pg_try_advisory_xact_lock_shared(u.a, u.b))::int ` +
			`FROM unnest($1::int4[], $2::int4[]) AS u(a, b)`,
		lockTable: `LOCK TABLE ` + t + ` IN SHARE ROW EXCLUSIVE MODE`,
		notify:    `SELECT pg_notify($1, $2)`,
		size:      `SELECT pg_total_relation_size('` + strings.ReplaceAll(t, `'`, `''`) + `'::regclass), pg_indexes_size('` + strings.ReplaceAll(t, `'`, `''`) + `'::regclass)`,
		vacuum:    `VACUUM (ANALYZE) ` + t,
		status: `SELECT n_live_tup, n_dead_tup, coalesce(greatest(last_autovacuum, last_vacuum)::text, 'never'), autovacuum_count + vacuum_count ` +
			`FROM pg_stat_user_tables WHERE relid = '` + strings.ReplaceAll(t, `'`, `''`) + `'::regclass`,
		tableExists: `SELECT to_regclass($1) IS NOT NULL`,
	}
	switch d {
	case Yugabyte:
		// Range sharding: without ASC the key is hash-sharded and every
		// range read visits every tablet. PostgreSQL rejects this form.
		q.createTable = `CREATE TABLE IF NOT EXISTS ` + t + ` (k bytea NOT NULL, v bytea, PRIMARY KEY (k ASC))`
	case Cockroach:
		q.createTable = `CREATE TABLE IF NOT EXISTS ` + t + ` (k bytea PRIMARY KEY, v bytea)`
	default:
		q.createTable = fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (k bytea PRIMARY KEY, v bytea) WITH (%s)`, t, autovacuumOptions)
	}
	return q
}
