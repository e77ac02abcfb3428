package sqlkv_test

import (
	"context"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/sqlkv"
	"github.com/tipkv/tipkv/sqlkv/pgtest"
	"github.com/tipkv/tipkv/tipkvtest/proctest"
)

// Several tipkv processes on one table, on package proctest's harness:
// two producers and two consumers, each a child process (this test binary
// run again). The test measures a quiet phase first (messages per second
// end to end), then makes trouble: it SIGKILLs children and starts them
// again, terminates server backends in the middle of their work
// (pg_terminate_backend), and kills one backend with kill -9 (the server
// then restarts every session and recovers), waiting for every child's
// progress after each. At the end proctest checks that nothing
// acknowledged was lost, nothing was consumed twice, no version was
// reused and no Update applied in part, every unknown outcome included
// (see package proctest).
func TestMultiProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs child processes for about 30 s")
	}
	table := newTable(t)
	admin := openStore(t, sqlkv.Config{Table: table}) // makes the table; finds the children's backends
	rig := proctest.Start(t, proctest.Config{
		Child: "TestMultiProcessChild",
		Env:   []string{mpDSNEnv + "=" + dsn(t), mpTableEnv + "=" + table},
	})

	// The quiet phase: throughput once every child has made progress.
	rig.WaitProgress(t, 1, "at the start")
	rate := rig.Rate(5*time.Second, 20_000)
	t.Logf("2 producer and 2 consumer processes, 10 messages per Update, up to 100 per receive: %.0f messages/s end to end", rate)

	// Trouble.
	const n = 10 // acknowledged writes of every child after each fault
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	ctx := context.Background()
	terminated, sigkills := 0, 0
	roles := rig.Roles()
	for round := range 12 {
		switch round % 3 {
		case 0: // SIGKILL a child, start it again
			r := roles[rng.IntN(len(roles))]
			rig.Kill(t, r)
			sigkills++
			rig.Restart(t, r)
		default: // terminate the backends of the children that are busy
			var k int
			require.NoError(t, admin.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE application_name LIKE 'sqlkv_mp_%' AND state <> 'idle'`).Scan(&k))
			terminated += k
		}
		rig.WaitProgress(t, n, "after a fault")
	}
	killed9 := false
	if server(t).Started() {
		// kill -9 a busy backend: the server ends every session, recovers
		// and accepts connections again.
		var pid int
		err := admin.Pool().QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'sqlkv_mp_%' AND state <> 'idle' LIMIT 1`).Scan(&pid)
		if err == nil {
			require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
			killed9 = true
			rig.WaitProgress(t, n, "after a backend's kill -9")
		}
	}
	t.Logf("trouble: %d children SIGKILLed and started again, %d backends terminated, kill -9 of a backend: %v", sigkills, terminated, killed9)
	rig.Stop(t)

	db, err := sqlkv.Open(ctx, sqlkv.Config{DSN: dsn(t), Table: table}, &tipkv.Options{Clock: proctest.LaterClock})
	require.NoError(t, err)
	defer db.Close()
	rig.Check(t, db)
}

// Failover the way production runs it: a primary and a synchronous
// streaming standby (pgtest.Pair), the children connected by a multi-host
// DSN that asks for a read-write session. With two producers and two
// consumers at work, the test kills the primary (pg_ctl stop -m
// immediate), promotes the standby, and waits until every child has made
// progress again on it; then, on the promoted standby, proctest checks
// that nothing acknowledged was lost, nothing was consumed twice, no
// version was reused and no Update applied in part: what a synchronous
// standby promises, through tipkv's unknown outcomes included.
func TestFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs child processes and a second server for about 20 s")
	}
	pair, err := pgtest.StartPair()
	require.NoError(t, err)
	defer func() { require.NoError(t, pair.Close()) }()
	const table = "kv_failover"
	ctx := context.Background()
	admin, err := sqlkv.NewStore(ctx, sqlkv.Config{DSN: pair.DSN(), Table: table}) // makes the table
	require.NoError(t, err)
	require.NoError(t, admin.Close())
	rig := proctest.Start(t, proctest.Config{
		Child: "TestMultiProcessChild",
		Env:   []string{mpDSNEnv + "=" + pair.DSN(), mpTableEnv + "=" + table},
	})
	const n = 20 // acknowledged writes of every child before and after
	rig.WaitProgress(t, n, "on the primary")
	before := rig.Writes()
	require.NoError(t, pair.KillPrimary())
	require.NoError(t, pair.Promote())
	rig.WaitProgress(t, n, "on the promoted standby")
	t.Logf("%d writes acknowledged before the primary was killed, %d in all", before, rig.Writes())
	rig.Stop(t)

	db, err := sqlkv.Open(ctx, sqlkv.Config{DSN: pair.StandbyDSN(), Table: table}, &tipkv.Options{Clock: proctest.LaterClock})
	require.NoError(t, err)
	defer db.Close()
	rig.Check(t, db)
}

// What a child of TestMultiProcess is told: the server and the table.
const (
	mpDSNEnv   = "SQLKV_MP_DSN"
	mpTableEnv = "SQLKV_MP_TABLE"
)

// TestMultiProcessChild is a child process of TestMultiProcess. Its
// connections carry application_name sqlkv_mp_<role>, for the parent to
// find its backends. It connects to the server it is told of without
// pgtest, which would check the server at once: after a kill -9 the server
// may be recovering, and the child waits for it.
// Message groups in several processes: two producers enqueue each
// batch's messages in 4 groups (window 1), two consumers acknowledge them
// and, in the same Update, record each in its group's feed stream, while
// the test SIGKILLs children and starts them again, six times. proctest
// checks every group's messages were acknowledged in queue order, none
// skipped, besides its usual checks (nothing lost, nothing twice).
func TestMultiProcessGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs child processes for about 20 s")
	}
	table := newTable(t)
	openStore(t, sqlkv.Config{Table: table}) // makes the table
	rig := proctest.Start(t, proctest.Config{
		Child:   "TestMultiProcessChild",
		Env:     []string{mpDSNEnv + "=" + dsn(t), mpTableEnv + "=" + table},
		Lease:   time.Second,
		Backlog: 200,
		Groups:  4,
	})
	rig.WaitProgress(t, 10, "at the start")
	rig.KillRandom(t, 6, 10)
	rig.Stop(t)
	db, err := sqlkv.Open(context.Background(), sqlkv.Config{DSN: dsn(t), Table: table}, &tipkv.Options{Clock: proctest.LaterClock})
	require.NoError(t, err)
	defer db.Close()
	rig.Check(t, db)
}

func TestMultiProcessChild(t *testing.T) {
	proctest.Child(t, func(ctx context.Context, role string) (*tipkv.DB, error) {
		pc, err := pgxpool.ParseConfig(os.Getenv(mpDSNEnv))
		if err != nil {
			return nil, err
		}
		pc.ConnConfig.RuntimeParams["application_name"] = "sqlkv_mp_" + role
		pc.MaxConns = 16                            // the size of the pool a store makes from a DSN
		pool, err := pgxpool.NewWithConfig(ctx, pc) // connects lazily
		if err != nil {
			return nil, err
		}
		db, err := sqlkv.Open(ctx, sqlkv.Config{Pool: pool, Table: os.Getenv(mpTableEnv)}, nil)
		if err != nil {
			pool.Close()
			return nil, err
		}
		t.Cleanup(pool.Close) // after the DB closes
		return db, nil
	})
}

// Consumer-group members in several processes on one table: two member
// processes (versioned.Member) of one group project the producers' feed,
// one at a time, each event and the group's cursor in one Update, while
// producers and a consumer run. The test SIGKILLs the active member in
// the middle of its Update, waits until the other one, the standby,
// projects (it took the group over once the lease and the ClockSkew
// passed), and starts the killed one again, three times. proctest checks
// that the projection holds every event up to the cursor exactly once, in
// order, whatever member projected it (see proctest.Rig.WaitProjected).
func TestMembersKilled(t *testing.T) {
	runMembers(t, func(rig *proctest.Rig, active string) string {
		rig.Kill(t, active)
		next := rig.WaitProjected(t, 20, "after "+active+" was killed")
		require.NotEqual(t, active, next, "the standby took over")
		rig.Restart(t, active)
		return next
	})
}

// runMembers runs two member processes of one group, with a producer and
// a consumer, on a new table; three times, fault does something to the
// active member and returns the one active after it; then the children
// stop and proctest checks the projection and everything else.
func runMembers(t *testing.T, fault func(rig *proctest.Rig, active string) string) {
	if testing.Short() {
		t.Skip("-short: runs child processes for about 20 s")
	}
	table := newTable(t)
	openStore(t, sqlkv.Config{Table: table}) // makes the table
	rig := proctest.Start(t, proctest.Config{
		Child:     "TestMultiProcessChild",
		Env:       []string{mpDSNEnv + "=" + dsn(t), mpTableEnv + "=" + table},
		Producers: 1, Consumers: 1, Members: 2,
		Lease: time.Second,
	})
	active := rig.WaitProjected(t, 20, "at the start")
	for range 3 {
		active = fault(rig, active)
	}
	rig.Stop(t)
	db, err := sqlkv.Open(context.Background(), sqlkv.Config{DSN: dsn(t), Table: table}, &tipkv.Options{Clock: proctest.LaterClock})
	require.NoError(t, err)
	defer db.Close()
	rig.Check(t, db)
}

// A member that is stopped (SIGSTOP) in the middle of its Update, not
// killed: between the Advance that checked its lease and the commit, so
// its connection and whatever it holds stay open while the standby takes
// the group over, and when it is sent on (SIGCONT) it commits, believing
// it still holds the group. The group's fencing must refuse that commit:
// proctest checks that the projection still holds every event up to the
// cursor exactly once, in order.
func TestMembersStopped(t *testing.T) {
	runMembers(t, func(rig *proctest.Rig, active string) string {
		rig.FreezeInUpdate(t, active)
		next := rig.WaitProjected(t, 20, "while "+active+" was stopped")
		require.NotEqual(t, active, next, "the standby took over")
		rig.Thaw(t, active)
		return rig.WaitProjected(t, 20, "after the stopped member went on")
	})
}
