// Package watch calls a function when a file's content changes. It follows
// the file through symlinks the way a Kubernetes ConfigMap volume swaps
// them: the volume's "..data" symlink is replaced in one rename, so the
// watcher watches directories, not the file, and compares content, not
// events. It is the one package that imports fsnotify.
package watch

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Defaults of Options.Debounce and Options.Settle.
const (
	DefaultDebounce = 500 * time.Millisecond
	DefaultSettle   = 2 * time.Second
)

// Options configure a Watcher. File and OnChange are required.
type Options struct {
	// File is the file whose content is watched. It may be a symlink, or
	// sit behind one, as a ConfigMap volume's files do.
	File string
	// Debounce is how long the watched directories must stay quiet after
	// an event before the file is read: a burst of events (an editor's
	// save, a ConfigMap's swap) reads it once. Zero means DefaultDebounce.
	Debounce time.Duration
	// Settle is how long the file's size and modification time must stay
	// the same, once the directories are quiet, before the file is read:
	// a writer that pauses mid-file for less than Settle is never read
	// half-written. Zero means DefaultSettle.
	Settle time.Duration
	// OnChange is called, on the watcher's goroutine, each time the file's
	// content differs from what it was when last read (at Start, then after
	// each burst). An event that leaves the content as it was calls
	// nothing.
	OnChange func()
	// Logger receives the watcher's warnings (a file that cannot be read,
	// a directory that cannot be watched); nil discards them.
	Logger *slog.Logger
}

// Watcher watches one file. Close stops it; it is safe to call Close from
// any goroutine, once.
type Watcher struct {
	o    Options
	fs   *fsnotify.Watcher // nil in tests that feed events by hand
	dirs map[string]bool   // the directories being watched
	sum  [sha256.Size]byte // the content last read; zero when unreadable
	stop chan struct{}
	done chan struct{}
}

// Start reads File's content and watches for changes to it until Close.
// It returns an error when the file's directory cannot be watched (it does
// not exist, or the system's inotify limits are reached).
func Start(o Options) (*Watcher, error) {
	if o.File == "" || o.OnChange == nil {
		return nil, errors.New("watch: File and OnChange are required")
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	w := newWatcher(o)
	w.fs = fw
	if err := fw.Add(filepath.Dir(o.File)); err != nil {
		fw.Close()
		return nil, fmt.Errorf("watch: watch %s: %w", filepath.Dir(o.File), err)
	}
	w.dirs[filepath.Dir(o.File)] = true
	w.follow()
	go w.loop(fw.Events, fw.Errors)
	return w, nil
}

// newWatcher returns a watcher that has read the file but watches nothing.
func newWatcher(o Options) *Watcher {
	if o.Debounce <= 0 {
		o.Debounce = DefaultDebounce
	}
	if o.Settle <= 0 {
		o.Settle = DefaultSettle
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{o: o, dirs: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	w.sum, _ = w.read()
	return w
}

// Close stops the watcher and waits until OnChange is no longer running.
func (w *Watcher) Close() error {
	close(w.stop)
	var err error
	if w.fs != nil {
		err = w.fs.Close()
	}
	<-w.done
	return err
}

// loop debounces events, then waits for the file to settle, and checks it.
func (w *Watcher) loop(events <-chan fsnotify.Event, errs <-chan error) {
	defer close(w.done)
	timer := time.NewTimer(w.o.Debounce)
	timer.Stop()
	defer timer.Stop()
	// settling is the file's stat as first seen after the last quiet
	// period, and since when it has been so.
	var (
		settling fileStat
		since    time.Time
	)
	for {
		select {
		case <-w.stop:
			return
		case _, ok := <-events:
			if !ok {
				return
			}
			timer.Reset(w.o.Debounce)
		case err, ok := <-errs:
			if !ok {
				return
			}
			// An overflowed queue lost events: check as if one came.
			w.o.Logger.Warn("watching the config file", "file", w.o.File, "error", err)
			timer.Reset(w.o.Debounce)
		case <-timer.C:
			st := w.stat()
			if st != settling || since.IsZero() {
				settling, since = st, time.Now()
				timer.Reset(w.o.Settle)
				continue
			}
			if left := w.o.Settle - time.Since(since); left > 0 {
				timer.Reset(left)
				continue
			}
			since = time.Time{}
			w.check()
		}
	}
}

// check re-resolves the file's symlinks and calls OnChange when its
// content changed.
func (w *Watcher) check() {
	w.follow()
	sum, err := w.read()
	if err != nil {
		// Mid-swap, or removed: the event that brings it back calls again.
		w.o.Logger.Warn("reading the watched config file", "file", w.o.File, "error", err)
		return
	}
	if sum == w.sum {
		return
	}
	w.sum = sum
	w.o.OnChange()
}

// follow watches the directory of the file the path resolves to, besides
// the path's own directory, and stops watching such a directory once the
// path no longer resolves into it (a ConfigMap's old timestamped
// directory, which the swap deletes).
func (w *Watcher) follow() {
	if w.fs == nil {
		return
	}
	own := filepath.Dir(w.o.File)
	want := map[string]bool{own: true}
	if real, err := filepath.EvalSymlinks(w.o.File); err == nil {
		want[filepath.Dir(real)] = true
	}
	for d := range w.dirs {
		if !want[d] {
			w.fs.Remove(d) //nolint:errcheck // a deleted directory's watch is already gone
			delete(w.dirs, d)
		}
	}
	for d := range want {
		if w.dirs[d] {
			continue
		}
		if err := w.fs.Add(d); err != nil {
			w.o.Logger.Warn("watching the config file's directory", "dir", d, "error", err)
			continue
		}
		w.dirs[d] = true
	}
}

// fileStat is what a write to the file changes: its size and modification
// time, or that it could not be read.
type fileStat struct {
	size, mtime int64 // mtime in nanoseconds since the Unix epoch
	missing     bool
}

// stat returns the file's size and modification time (following symlinks).
func (w *Watcher) stat() fileStat {
	fi, err := os.Stat(w.o.File)
	if err != nil {
		return fileStat{missing: true}
	}
	return fileStat{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
}

// read returns the SHA-256 of the file's content.
func (w *Watcher) read() ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	f, err := os.Open(w.o.File)
	if err != nil {
		return sum, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return sum, err
	}
	h.Sum(sum[:0])
	return sum, nil
}
