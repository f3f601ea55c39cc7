package simulate

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ReadTrace reads a recorded trace: CSV rows of time, key and cost. Time is
// since the start of the trace, in seconds ("1.25") or as a Go duration
// ("1250ms"); key defaults to DefaultKey and cost to 1. A first row whose
// time column reads "time" is a header; lines starting with # are comments.
// Errors name the line.
func ReadTrace(r io.Reader) ([]Event, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	var ev []Event
	for first := true; ; first = false {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("trace: %w", err)
		}
		line, _ := cr.FieldPos(0)
		if first && strings.EqualFold(strings.TrimSpace(rec[0]), "time") {
			continue
		}
		e, err := traceRow(rec)
		if err != nil {
			return nil, fmt.Errorf("trace line %d: %w", line, err)
		}
		ev = append(ev, e)
	}
	return traceEvents(ev)
}

// traceRow parses one CSV record.
func traceRow(rec []string) (Event, error) {
	if len(rec) > 3 {
		return Event{}, fmt.Errorf("want time,key,cost, got %d fields", len(rec))
	}
	e := Event{Key: DefaultKey, Cost: 1}
	s := strings.TrimSpace(rec[0])
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		e.At = time.Duration(f * 1e9)
		if f > 1e9 {
			return Event{}, fmt.Errorf("time %q is beyond 10^9 s", s)
		}
	} else if d, err := time.ParseDuration(s); err == nil {
		e.At = d
	} else {
		return Event{}, fmt.Errorf("time %q is neither seconds nor a duration", s)
	}
	if e.At < 0 {
		return Event{}, fmt.Errorf("time %q is negative", s)
	}
	if len(rec) > 1 && strings.TrimSpace(rec[1]) != "" {
		e.Key = strings.TrimSpace(rec[1])
	}
	if len(rec) > 2 && strings.TrimSpace(rec[2]) != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(rec[2]), 10, 64)
		if err != nil || n < 1 {
			return Event{}, fmt.Errorf("cost %q is not a whole number of at least 1", rec[2])
		}
		e.Cost = n
	}
	return e, nil
}

// traceEvents validates recorded events and returns them sorted by time
// (stable), truncated to whole microseconds.
func traceEvents(in []Event) ([]Event, error) {
	if len(in) == 0 {
		return nil, errors.New("trace has no requests")
	}
	ev := slices.Clone(in)
	for i := range ev {
		if ev[i].At < 0 || ev[i].Cost < 0 {
			return nil, fmt.Errorf("trace request %d: negative time or cost", i)
		}
		if ev[i].Cost == 0 {
			ev[i].Cost = 1
		}
		if ev[i].Key == "" {
			ev[i].Key = DefaultKey
		}
		ev[i].At = ev[i].At.Truncate(time.Microsecond)
	}
	slices.SortStableFunc(ev, func(a, b Event) int { return cmp.Compare(a.At, b.At) })
	return ev, nil
}
