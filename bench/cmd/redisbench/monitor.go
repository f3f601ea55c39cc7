package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
)

// probeKey is the key the harness decides once through sluice's store while
// watching MONITOR, to learn the exact script call the store sends.
const probeKey = "redisbench-probe-key"

// scriptCall is one script invocation as a client sends it, with the
// caller's key marked in each Redis key so that other keys can be put there.
type scriptCall struct {
	sha    string   // EVALSHA digest of source
	source string   // script text
	marker string   // what stands for the caller's key inside keys
	keys   []string // Redis keys, each containing marker
	args   []string
}

// withKey returns the call's keys with s in place of the marker.
func (c *scriptCall) withKey(s string) []string {
	out := make([]string, len(c.keys))
	for i, k := range c.keys {
		out[i] = strings.ReplaceAll(k, c.marker, s)
	}
	return out
}

// captureScriptCall opens a MONITOR connection to addr, flushes the
// server's script cache, runs probe and returns the first script call a
// client (not a script) sent with a key containing marker. With the cache
// empty the client must send the script text, by EVAL or SCRIPT LOAD, and
// the capture takes it from there.
func captureScriptCall(ctx context.Context, addr, marker string, probe func(context.Context) error) (*scriptCall, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := redistest.Dial(ctx, addr, "")
	if err != nil {
		return nil, fmt.Errorf("capture script call: %w", err)
	}
	defer conn.Close()
	for _, cmd := range [][]any{{"SCRIPT", "FLUSH"}, {"MONITOR"}} {
		if ok, err := conn.DoContext(ctx, cmd...); err != nil || ok != "OK" {
			return nil, fmt.Errorf("capture script call: %s replied %q: %v", cmd[0], ok, err)
		}
	}
	if err := probe(ctx); err != nil {
		return nil, fmt.Errorf("capture script call: probe: %w", err)
	}
	loaded := map[string]string{} // sha → source, from SCRIPT LOAD
	for {
		v, err := conn.Receive(ctx)
		line, _ := v.(string)
		if err != nil {
			return nil, fmt.Errorf("capture script call: no script call with a key containing %q seen: %w", marker, err)
		}
		src, argv, err := parseMonitorLine(line)
		if err != nil {
			return nil, fmt.Errorf("capture script call: %w", err)
		}
		if src == "lua" {
			continue // a command run by a script
		}
		call, err := scriptCallFrom(argv, marker, loaded)
		if err != nil {
			return nil, fmt.Errorf("capture script call: %q: %w", line, err)
		}
		if call != nil {
			return call, nil
		}
	}
}

// parseMonitorLine parses one MONITOR line such as
//
//	1700000000.123456 [0 127.0.0.1:5000] "EVALSHA" "ab12…" "1" "key" "arg"
//
// into the command's source ("127.0.0.1:5000", or "lua" for a command a
// script ran) and its arguments.
func parseMonitorLine(line string) (src string, argv []string, err error) {
	_, rest, ok := strings.Cut(line, "[")
	if !ok {
		return "", nil, fmt.Errorf("bad MONITOR line %q", line)
	}
	head, rest, ok := strings.Cut(rest, "] ")
	if !ok {
		return "", nil, fmt.Errorf("bad MONITOR line %q", line)
	}
	if _, src, ok = strings.Cut(head, " "); !ok {
		return "", nil, fmt.Errorf("bad MONITOR line %q", line)
	}
	if argv, err = splitQuoted(rest); err != nil {
		return "", nil, fmt.Errorf("bad MONITOR line %q: %w", line, err)
	}
	return src, argv, nil
}

// scriptCallFrom returns the script call argv makes when it is an EVAL, or
// an EVALSHA of a script in loaded, with a key containing marker; else nil.
// A SCRIPT LOAD is added to loaded.
func scriptCallFrom(argv []string, marker string, loaded map[string]string) (*scriptCall, error) {
	if len(argv) == 0 {
		return nil, nil
	}
	name := strings.ToUpper(argv[0])
	if name == "SCRIPT" && len(argv) == 3 && strings.ToUpper(argv[1]) == "LOAD" {
		loaded[sha1Hex(argv[2])] = argv[2]
		return nil, nil
	}
	if (name != "EVAL" && name != "EVALSHA") || len(argv) < 3 {
		return nil, nil
	}
	n, err := strconv.Atoi(argv[2])
	if err != nil || n < 0 || 3+n > len(argv) {
		return nil, errors.New("bad numkeys")
	}
	c := &scriptCall{marker: marker, keys: argv[3 : 3+n], args: argv[3+n:]}
	if !slices.ContainsFunc(c.keys, func(k string) bool { return strings.Contains(k, marker) }) {
		return nil, nil
	}
	if name == "EVAL" {
		c.source, c.sha = argv[1], sha1Hex(argv[1])
		return c, nil
	}
	c.sha = strings.ToLower(argv[1])
	if c.source = loaded[c.sha]; c.source == "" {
		return nil, nil // NOSCRIPT: the EVAL with the text follows
	}
	return c, nil
}

// sha1Hex returns the script digest EVALSHA takes.
func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// splitQuoted splits a sequence of space-separated strings in the quoting
// of Redis' sdscatrepr: "…" with \\, \", \n, \r, \t, \a, \b and \xHH.
func splitQuoted(s string) ([]string, error) {
	var out []string
	for i := 0; i < len(s); {
		if s[i] == ' ' {
			i++
			continue
		}
		if s[i] != '"' {
			return nil, fmt.Errorf("expected '\"' at %d", i)
		}
		var b strings.Builder
		i++
		for {
			if i >= len(s) {
				return nil, errors.New("unterminated string")
			}
			c := s[i]
			if c == '"' {
				i++
				break
			}
			if c != '\\' {
				b.WriteByte(c)
				i++
				continue
			}
			if i+1 >= len(s) {
				return nil, errors.New("dangling escape")
			}
			switch e := s[i+1]; e {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'x':
				if i+3 >= len(s) {
					return nil, errors.New("short \\x escape")
				}
				v, err := strconv.ParseUint(s[i+2:i+4], 16, 8)
				if err != nil {
					return nil, fmt.Errorf("bad \\x escape: %w", err)
				}
				b.WriteByte(byte(v))
				i += 2
			default:
				b.WriteByte(e)
			}
			i += 2
		}
		out = append(out, b.String())
	}
	return out, nil
}
