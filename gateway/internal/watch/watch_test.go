package watch

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fsnotify/fsnotify"
)

// TestDebounce feeds events by hand on fake time: a burst reads the file
// once, after the quiet period; an event that leaves the content as it was
// calls nothing; a change calls OnChange once.
func TestDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "sluice.yaml")
		write(t, file, "a")
		var calls atomic.Int32
		w := newWatcher(Options{File: file, Debounce: time.Second, Settle: time.Millisecond, OnChange: func() { calls.Add(1) }})
		events, errs := make(chan fsnotify.Event), make(chan error)
		go w.loop(events, errs)
		defer w.Close()
		step := func(name string, want int32) {
			t.Helper()
			synctest.Wait()
			if got := calls.Load(); got != want {
				t.Fatalf("%s: OnChange called %d times, want %d", name, got, want)
			}
		}

		events <- fsnotify.Event{Name: file, Op: fsnotify.Write}
		time.Sleep(time.Second + 5*time.Millisecond)
		step("an event that changes nothing", 0)

		write(t, file, "b")
		for range 5 { // a burst, each event inside the quiet period of the last
			events <- fsnotify.Event{Name: file, Op: fsnotify.Write}
			time.Sleep(900 * time.Millisecond)
		}
		step("a burst still within the quiet period", 0)
		time.Sleep(105 * time.Millisecond)
		step("a burst, then quiet", 1)

		errs <- fsnotify.ErrEventOverflow // lost events: the file is checked
		write(t, file, "c")
		time.Sleep(time.Second + 5*time.Millisecond)
		step("an overflow, with the file changed", 2)

		os.Remove(file)
		events <- fsnotify.Event{Name: file, Op: fsnotify.Remove}
		time.Sleep(time.Second + 5*time.Millisecond)
		step("the file removed", 2)
		write(t, file, "c")
		events <- fsnotify.Event{Name: file, Op: fsnotify.Create}
		time.Sleep(time.Second + 5*time.Millisecond)
		step("the file back as it was", 2)
	})
}

// TestConfigMapSwap lays a directory out as the kubelet lays out a
// ConfigMap volume (sluice.yaml -> ..data/sluice.yaml, ..data ->
// ..TIMESTAMP) and swaps it as the kubelet does, twice: each swap that
// changes the content calls OnChange with the new content in place. The
// events are real; the test waits on OnChange, not on time.
func TestConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	version := func(name, content string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, name, "sluice.yaml"), content)
	}
	swap := func(name, old string) {
		t.Helper()
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(name, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		if old != "" {
			if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
				t.Fatal(err)
			}
		}
	}
	version("..2026_01_01_00_00_00.1", "one")
	swap("..2026_01_01_00_00_00.1", "")
	file := filepath.Join(dir, "sluice.yaml")
	if err := os.Symlink("..data/sluice.yaml", file); err != nil {
		t.Fatal(err)
	}

	changed := make(chan string, 8)
	w, err := Start(Options{File: file, Debounce: 10 * time.Millisecond, OnChange: func() {
		b, _ := os.ReadFile(file)
		changed <- string(b)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	version("..2026_01_01_00_00_00.2", "two")
	swap("..2026_01_01_00_00_00.2", "..2026_01_01_00_00_00.1")
	wantChange(t, changed, "two")

	// The same content under a new timestamp: the swap's events call
	// nothing, so the next change is the next thing seen.
	version("..2026_01_01_00_00_00.3", "two")
	swap("..2026_01_01_00_00_00.3", "..2026_01_01_00_00_00.2")
	version("..2026_01_01_00_00_00.4", "three")
	swap("..2026_01_01_00_00_00.4", "..2026_01_01_00_00_00.3")
	wantChange(t, changed, "three")
}

// TestRewrite covers a plain file changed in place and replaced by rename,
// as editors save.
func TestRewrite(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "sluice.yaml")
	write(t, file, "one")
	changed := make(chan string, 8)
	w, err := Start(Options{File: file, Debounce: 10 * time.Millisecond, OnChange: func() {
		b, _ := os.ReadFile(file)
		changed <- string(b)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	write(t, file, "two")
	// Writing in place truncates first: a slow write may show the empty
	// file for a moment, so wait for the content rather than the first call.
	for got := ""; got != "two"; {
		got = nextChange(t, changed)
	}
	write(t, filepath.Join(dir, ".sluice.yaml.swp"), "three")
	if err := os.Rename(filepath.Join(dir, ".sluice.yaml.swp"), file); err != nil {
		t.Fatal(err)
	}
	wantChange(t, changed, "three")
}

func TestStartErrors(t *testing.T) {
	if _, err := Start(Options{File: filepath.Join(t.TempDir(), "missing", "sluice.yaml"), OnChange: func() {}}); err == nil {
		t.Error("Start on a file in a missing directory: no error")
	}
	if _, err := Start(Options{File: "sluice.yaml"}); err == nil {
		t.Error("Start without OnChange: no error")
	}
}

// wantChange waits for OnChange to report content want. The bound only
// keeps a broken watcher from hanging the run; nothing is timed.
func wantChange(t *testing.T, changed <-chan string, want string) {
	t.Helper()
	if got := nextChange(t, changed); got != want {
		t.Fatalf("OnChange saw %q, want %q", got, want)
	}
}

// nextChange returns the content OnChange saw next.
func nextChange(t *testing.T, changed <-chan string) string {
	t.Helper()
	select {
	case got := <-changed:
		return got
	case <-time.After(time.Minute):
		t.Fatal("OnChange not called within a minute")
		return ""
	}
}

func write(t *testing.T, file, content string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPausedWriterNeverReadHalf writes a file in two halves, 1.2 s apart,
// as an editor or a script that does not rename might: with the default
// Settle, the watcher reads it only once it is whole. The events and the
// clock are real.
func TestPausedWriterNeverReadHalf(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "sluice.yaml")
	write(t, file, "routes: []\n")
	whole := "routes:\n  - id: a\n    match: {path: /a}\n    respond: {body: a}\n"
	got := make(chan string, 4)
	w, err := Start(Options{File: file, OnChange: func() {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Error(err)
		}
		got <- string(b)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	f, err := os.OpenFile(file, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(whole[:len(whole)/2]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond) // the writer's pause, shorter than Settle
	if _, err := f.WriteString(whole[len(whole)/2:]); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != whole {
			t.Fatalf("OnChange saw %q, want the whole file %q", s, whole)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("OnChange never called for the rewritten file")
	}
	// A read of the half would have come first; none comes after.
	select {
	case s := <-got:
		t.Errorf("OnChange called again, with %q", s)
	case <-time.After(DefaultDebounce + DefaultSettle + 500*time.Millisecond):
	}
}
