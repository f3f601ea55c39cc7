package admin

import (
	"testing"
	"time"
)

func TestTopKeysBounded(t *testing.T) {
	now := time.Unix(1764100000, 0)
	tk := newTopKeys(8, time.Minute, 5)
	// One heavy key among many light ones: the heavy one is found and
	// never undercounted, while memory stays at 8 keys per minute.
	for i := range 1000 {
		tk.add(now, "api", []string{"heavy"})
		tk.add(now, "api", []string{"light" + string(rune('a'+i%26)) + string(rune('a'+i/26%26))})
	}
	top := tk.top(now, 3)
	if top[0].Key[0] != "heavy" || top[0].Denied < 1000 {
		t.Errorf("top = %+v, want heavy first with at least 1000", top)
	}
	if n := len(tk.ring[0].entries) + len(tk.ring[1].entries) + len(tk.ring[2].entries) + len(tk.ring[3].entries) + len(tk.ring[4].entries); n > 8 {
		t.Errorf("%d entries, want at most 8", n)
	}
	// Five minutes later the old counts are gone.
	if top := tk.top(now.Add(5*time.Minute), 3); len(top) != 0 {
		t.Errorf("top after 5 minutes = %+v, want none", top)
	}
	if top := tk.top(now.Add(4*time.Minute), 3); len(top) == 0 {
		t.Errorf("top after 4 minutes is empty, want the last 5 minutes kept")
	}
}
