package redistest

import (
	"context"
	"fmt"
	"strings"
)

// Monitor reads a server's MONITOR stream: the commands it runs, one line
// each, such as `1764100000.123456 [0 127.0.0.1:4711] "EVALSHA" "ab12…" "1" "k"`.
type Monitor struct {
	s   *Server
	c   *Conn
	seq int
}

// Monitor opens a connection in MONITOR mode. Close it when done.
func (s *Server) Monitor() (*Monitor, error) {
	c, err := s.Dial()
	if err != nil {
		return nil, err
	}
	if v, err := c.Do("MONITOR"); err != nil || v != "OK" {
		c.Close()
		return nil, fmt.Errorf("redistest: MONITOR = %#v, %v", v, err)
	}
	return &Monitor{s: s, c: c}, nil
}

// Lines returns the lines of the commands the server ran since the last call
// (or since Monitor). It sends a marker command and reads up to it, so every
// command the server ran before Lines was called is included. It gives up
// when ctx ends, or after 5 seconds without a line.
func (m *Monitor) Lines(ctx context.Context) ([]string, error) {
	m.seq++
	marker := fmt.Sprintf("redistest-monitor-marker-%p-%d", m, m.seq)
	if _, err := m.s.DoContext(ctx, "ECHO", marker); err != nil {
		return nil, err
	}
	var lines []string
	for {
		v, err := m.c.Receive(ctx)
		if err != nil {
			return lines, fmt.Errorf("redistest: MONITOR stream before the marker: %w", err)
		}
		line, _ := v.(string)
		if strings.Contains(line, marker) {
			return lines, nil
		}
		lines = append(lines, line)
	}
}

// Close closes the MONITOR connection.
func (m *Monitor) Close() error { return m.c.Close() }
