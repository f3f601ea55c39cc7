package redistest

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/testdiff"
)

func TestReadReply(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want any
	}{
		{"simple string", "+OK\r\n", "OK"},
		{"error", "-ERR unknown command 'FOO'\r\n", &ReplyError{Msg: "ERR unknown command 'FOO'"}},
		{"integer", ":-42\r\n", int64(-42)},
		{"bulk", "$5\r\nhe\r\no\r\n", "he\r\no"},
		{"empty bulk", "$0\r\n\r\n", ""},
		{"line longer than the buffer", "+" + strings.Repeat("x", 10000) + "\r\n", strings.Repeat("x", 10000)},
		{"null bulk", "$-1\r\n", nil},
		{"null array", "*-1\r\n", nil},
		{"empty array", "*0\r\n", []any{}},
		{"nested array", "*3\r\n:1\r\n*2\r\n$1\r\na\r\n$-1\r\n-NOSCRIPT x\r\n",
			[]any{int64(1), []any{"a", nil}, &ReplyError{Msg: "NOSCRIPT x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readReply(bufio.NewReader(strings.NewReader(tt.in)))
			if err != nil {
				t.Fatalf("readReply(%q) error: %v", tt.in, err)
			}
			if diff := testdiff.Diff(tt.want, got); diff != "" {
				t.Errorf("readReply(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestReadReplyMalformed(t *testing.T) {
	for _, in := range []string{
		"",
		"\r\n",
		"+OK\n",
		"+OK",
		":12x\r\n",
		"$5\r\nabc\r\n",
		"$3\r\nabcXY",
		"$-2\r\n",
		"$999999999999\r\n",
		"*2\r\n:1\r\n",
		"?what\r\n",
	} {
		if v, err := readReply(bufio.NewReader(strings.NewReader(in))); err == nil {
			t.Errorf("readReply(%q) = %#v, nil; want an error", in, v)
		}
	}
}

func TestWriteCommand(t *testing.T) {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	err := writeCommand(w, []any{"SET", []byte("k"), 7, int64(-1), uint64(2), 1500 * time.Millisecond, 1.5, ""})
	if err != nil {
		t.Fatal(err)
	}
	want := "*8\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n7\r\n$2\r\n-1\r\n$1\r\n2\r\n$4\r\n1500\r\n$3\r\n1.5\r\n$0\r\n\r\n"
	if got := buf.String(); got != want {
		t.Errorf("writeCommand wrote %q, want %q", got, want)
	}
}

func TestReplyErrorPrefix(t *testing.T) {
	for msg, want := range map[string]string{
		"MOVED 3999 127.0.0.1:6381":       "MOVED",
		"NOAUTH Authentication required.": "NOAUTH",
		"OOM":                             "OOM",
		"":                                "",
	} {
		if got := (&ReplyError{Msg: msg}).Prefix(); got != want {
			t.Errorf("ReplyError{%q}.Prefix() = %q, want %q", msg, got, want)
		}
	}
}

func TestParseInfo(t *testing.T) {
	in := "# Server\r\nredis_version:7.0.15\r\n\r\n# Commandstats\r\ncmdstat_get:calls=2,usec=3\r\n"
	want := map[string]string{"redis_version": "7.0.15", "cmdstat_get": "calls=2,usec=3"}
	if diff := testdiff.Diff(want, parseInfo(in)); diff != "" {
		t.Errorf("parseInfo mismatch (-want +got):\n%s", diff)
	}
}

func TestSlotRange(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 7} {
		next := 0
		for i := range n {
			lo, hi := slotRange(i, n)
			if lo != next || hi < lo {
				t.Fatalf("slotRange(%d, %d) = %d-%d, want to start at %d", i, n, lo, hi, next)
			}
			next = hi + 1
		}
		if next != slotCount {
			t.Errorf("slotRange over %d masters covers %d slots, want %d", n, next, slotCount)
		}
	}
}

func TestFreePort(t *testing.T) {
	lo, hi := portRange()
	if lo >= hi || lo < 1024 || hi > 65536 {
		t.Fatalf("portRange() = [%d, %d), want a non-empty range of unprivileged ports", lo, hi)
	}
	for range 20 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p == reservedPort {
			t.Fatalf("FreePort() = %d, the reserved port", p)
		}
	}
}
