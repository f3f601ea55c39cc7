package redistest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConnKeepsOneConnection(t *testing.T) {
	s := NewServer(t, ServerOptions{Password: "secret"})
	c, err := s.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Do("CLIENT", "SETNAME", "held"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []any
		want any
	}{
		{[]any{"SET", "k", 7}, "OK"},
		{[]any{"INCR", "k"}, int64(8)},
		{[]any{"GET", "k"}, "8"},
		{[]any{"CLIENT", "GETNAME"}, "held"}, // the same connection answers
	} {
		got, err := c.Do(tt.args...)
		if err != nil || got != tt.want {
			t.Errorf("Do(%v) = %#v, %v; want %#v", tt.args, got, err, tt.want)
		}
	}
	_, err = c.Do("NOSUCHCOMMAND")
	var re *ReplyError
	if !errors.As(err, &re) || re.Prefix() != "ERR" {
		t.Errorf("Do(NOSUCHCOMMAND) error = %v, want an ERR reply", err)
	}
	if _, err := c.Do(); err == nil {
		t.Error("Do() with no command: no error")
	}
}

func TestDialRefusedOverMaxclients(t *testing.T) {
	s := NewServer(t, ServerOptions{})
	held, err := s.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := held.Do("CONFIG", "SET", "maxclients", "1"); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Dial(); err == nil {
		c.Close()
		t.Fatal("Dial over maxclients: no error")
	}
}

func TestDialWrongPassword(t *testing.T) {
	s := NewServer(t, ServerOptions{Password: "secret"})
	if c, err := Dial(t.Context(), s.Addr(), "wrong"); err == nil {
		c.Close()
		t.Fatal("Dial with a wrong password: no error")
	}
}

func TestConnReceivesMonitorStream(t *testing.T) {
	s := NewServer(t, ServerOptions{})
	mon, err := s.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	if v, err := mon.Do("MONITOR"); err != nil || v != "OK" {
		t.Fatalf("MONITOR = %#v, %v; want OK", v, err)
	}
	if _, err := s.Do("SET", "watched", "1"); err != nil {
		t.Fatal(err)
	}
	for {
		v, err := mon.Receive(t.Context())
		if err != nil {
			t.Fatalf("Receive: %v, want the MONITOR line of SET", err)
		}
		if line, _ := v.(string); strings.Contains(line, `"SET" "watched" "1"`) {
			break
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := mon.Receive(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Receive with nothing sent = %v, want context.DeadlineExceeded", err)
	}
}

// TestMonitorLines: Lines returns exactly the commands run since the last
// call, the marker excluded.
func TestMonitorLines(t *testing.T) {
	s := NewServer(t, ServerOptions{})
	m, err := s.Monitor()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, k := range []string{"a", "b"} {
		if _, err := s.Do("SET", k, "1"); err != nil {
			t.Fatal(err)
		}
	}
	lines, err := m.Lines(t.Context())
	if err != nil || len(lines) != 2 || !strings.Contains(lines[0], `"SET" "a" "1"`) || !strings.Contains(lines[1], `"SET" "b" "1"`) {
		t.Fatalf("Lines = %q, %v; want the two SETs", lines, err)
	}
	if lines, err := m.Lines(t.Context()); err != nil || len(lines) != 0 {
		t.Fatalf("Lines with nothing run = %q, %v; want none", lines, err)
	}
}
