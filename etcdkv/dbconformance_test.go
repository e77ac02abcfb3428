package etcdkv_test

import (
	"testing"

	"github.com/tipkv/tipkv/tipkvtest"
)

// dbScale divides the suite's sizes: by 4 in the full run, by 16 with
// -short (CI). Under -race an etcd round trip costs several times what it
// costs without (the members run in this process, instrumented too). With
// -race on a 2-core machine shared with other builds, the suite took 4.5
// minutes at a quarter of the sizes (load 15; the queue model 2 of them),
// 3.5 at an eighth (load 20), 45 s at a sixteenth (load 8). The models
// draw new seeds on every run, so CI covers more over time.
func dbScale() int {
	if testing.Short() {
		return 16
	}
	return 4
}

// The tipkv conformance suite (documents, feeds, queues, the outbox,
// misuse) on the test cluster, with the harness the contract's suite runs
// on: every test on a namespace of its own.
func TestConformanceDB(t *testing.T) {
	h := harness()
	h.Scale = dbScale()
	tipkvtest.Run(t, h)
}
