package queue

import (
	"testing"
	"time"
)

// A clock that stands still (an injected one that a test has not moved)
// must not make Wait's timer spin: each sleep that ends on the timer with
// the clock where it was doubles, up to a second, never below what is
// left.
func TestTimerSleep(t *testing.T) {
	for _, tc := range []struct {
		left, last time.Duration
		stalled    bool
		want       time.Duration
	}{
		{left: time.Millisecond, want: time.Millisecond},
		{left: time.Millisecond, last: time.Hour, want: time.Millisecond},
		{left: time.Nanosecond, last: time.Nanosecond, stalled: true, want: 2 * time.Nanosecond},
		{left: time.Millisecond, last: time.Millisecond, stalled: true, want: 2 * time.Millisecond},
		{left: time.Millisecond, last: 700 * time.Millisecond, stalled: true, want: time.Second},
		{left: time.Millisecond, last: time.Second, stalled: true, want: time.Second},
		{left: time.Hour, last: time.Hour, stalled: true, want: time.Hour},
	} {
		if got := timerSleep(tc.left, tc.last, tc.stalled); got != tc.want {
			t.Errorf("timerSleep(%v, %v, %v) = %v, want %v", tc.left, tc.last, tc.stalled, got, tc.want)
		}
	}
	// From a nanosecond, a stalled clock reaches the one-second cap in 30
	// sleeps.
	sleep, n := time.Nanosecond, 0
	for ; sleep < maxStalledSleep; n++ {
		sleep = timerSleep(time.Nanosecond, sleep, true)
	}
	if n > 30 {
		t.Errorf("%d sleeps to reach the cap", n)
	}
}
