package memory

import (
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"

	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// TestSweeper runs the store on the system clock inside a synctest bubble,
// where time is fake: idle keys past their TTL are removed by the sweeper,
// keys still limited are kept.
func TestSweeper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Options{SweepInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		// One token back per 100ms: a key that took one is whole again after 100ms.
		short := mustPolicy(t, ratelimit.PolicyConfig{Name: "short", Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: 10})
		// A window of an hour keeps its count until the window ends.
		long := mustPolicy(t, ratelimit.PolicyConfig{Name: "long", Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Hour})
		for i := range 100 {
			evaluate(t, s, ratelimit.Request{Key: "idle-" + strconv.Itoa(i), Policy: short})
		}
		evaluate(t, s, ratelimit.Request{Key: "limited", Policy: long})
		if st := s.Stats(); st.Keys != 101 {
			t.Fatalf("Stats().Keys = %d, want 101", st.Keys)
		}

		time.Sleep(2500 * time.Millisecond) // fake time: two sweeps
		synctest.Wait()
		if st := s.Stats(); st.Keys != 1 || st.Expired != 100 {
			t.Errorf("after 2.5s: %+v, want the 1 limited key left and 100 expired", st)
		}
		if ok, _ := evaluate(t, s, ratelimit.Request{Key: "limited", Policy: long}); ok {
			t.Error("the limited key was forgotten: a second request in its window was admitted")
		}
	})
}

// TestSweeperStopsOnClose checks that Close ends the sweeper goroutine:
// synctest.Test fails if a goroutine of the bubble is left running.
func TestSweeperStopsOnClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		s.Close()
	})
}

// TestSweeperShrinksMaps checks that a shard's table is rebuilt once a burst of
// keys has expired, so its memory is given back.
func TestSweeperShrinksMaps(t *testing.T) {
	clock := kit.NewManualClock(t0)
	s := newTestStore(t, Options{Clock: clock, Shards: 1, SweepInterval: time.Hour})
	p := mustPolicy(t, ratelimit.PolicyConfig{Name: "p", Algorithm: ratelimit.TokenBucket, Capacity: 1, Rate: 1})
	for i := range 1000 {
		evaluate(t, s, ratelimit.Request{Key: strconv.Itoa(i), Policy: p})
	}
	if peak := s.shards[0].t.peak; peak != 1000 {
		t.Fatalf("peak = %d, want 1000", peak)
	}
	clock.Advance(time.Second)
	evaluate(t, s, ratelimit.Request{Key: "0", Policy: p})
	clock.Advance(time.Second / 2)
	s.sweep()
	if tb := &s.shards[0].t; tb.len() != 1 || tb.peak != 1 || len(tb.slots) != minSlots {
		t.Errorf("after the sweep: %d keys in %d slots, peak %d; want 1 in a rebuilt table of %d slots with peak 1",
			tb.len(), len(tb.slots), tb.peak, minSlots)
	}
}
