package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
)

// aclDoc is where the documented Redis ACL lives: the "ACL SETUSER" lines
// between the redis-acl markers of docs/operations.md.
const aclDoc = "../../docs/operations.md"

// documentedACL returns the ACL SETUSER lines of docs/operations.md's
// redis-acl block, each split into its words.
func documentedACL(t *testing.T) [][]string {
	t.Helper()
	raw, err := os.ReadFile(aclDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(raw), "<!-- redis-acl: begin")
	if ok {
		block, _, ok = strings.Cut(block, "<!-- redis-acl: end")
	}
	if !ok {
		t.Fatalf("%s has no <!-- redis-acl: begin --> ... <!-- redis-acl: end --> block", aclDoc)
	}
	var lines [][]string
	for _, line := range strings.Split(block, "\n") {
		if strings.HasPrefix(line, "ACL SETUSER ") {
			lines = append(lines, strings.Fields(line))
		}
	}
	if len(lines) != 3 {
		t.Fatalf("%s's redis-acl block has %d ACL SETUSER lines, want 3 (the user, the compat scg keys, Cluster's commands)", aclDoc, len(lines))
	}
	return lines
}

// aclRules splits ACL SETUSER words into the commands allowed (+name or
// +name|sub, lower case) and the key patterns (~pattern).
func aclRules(words []string) (commands, patterns []string) {
	for _, w := range words {
		switch {
		case strings.HasPrefix(w, "+") && !strings.HasPrefix(w, "+@"):
			commands = append(commands, strings.ToLower(w[1:]))
		case strings.HasPrefix(w, "~"):
			patterns = append(patterns, w[1:])
		}
	}
	return commands, patterns
}

// monitorCommand reads one MONITOR line, such as
// `1764100000.123456 [0 127.0.0.1:4711] "EVALSHA" "ab12" "1" "k"`: whether
// a script ran it, and its words.
func monitorCommand(line string) (lua bool, words []string, err error) {
	_, rest, ok := strings.Cut(line, "] ")
	if !ok {
		return false, nil, fmt.Errorf("MONITOR line %q", line)
	}
	lua = strings.Contains(line, " lua] ")
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		if rest[0] != '"' {
			return false, nil, fmt.Errorf("MONITOR line %q", line)
		}
		end := 1
		for end < len(rest) && rest[end] != '"' {
			if rest[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(rest) {
			return false, nil, fmt.Errorf("MONITOR line %q", line)
		}
		w, err := strconv.Unquote(rest[:end+1])
		if err != nil {
			return false, nil, fmt.Errorf("MONITOR line %q: %v", line, err)
		}
		words = append(words, w)
		rest = rest[end+1:]
	}
	if len(words) == 0 {
		return false, nil, fmt.Errorf("MONITOR line %q", line)
	}
	return lua, words, nil
}

// commandName is an ACL command name: lower case, with the subcommand of
// a container command (script|load, client|setname).
func commandName(words []string) string {
	name := strings.ToLower(words[0])
	switch name {
	case "script", "client", "config", "cluster", "acl", "command":
		if len(words) > 1 {
			name += "|" + strings.ToLower(words[1])
		}
	}
	return name
}

// commandKeys returns the keys of a command sluice sends or its scripts
// run.
func commandKeys(words []string) []string {
	args := words[1:]
	switch strings.ToLower(words[0]) {
	case "eval", "evalsha", "eval_ro", "evalsha_ro":
		if len(args) < 2 {
			return nil
		}
		n, _ := strconv.Atoi(args[1])
		return args[2 : 2+min(n, len(args)-2)]
	case "mget", "del", "exists", "unlink":
		return args
	case "time", "ping", "hello", "auth", "client", "script", "config", "echo", "select", "cluster", "role", "info":
		return nil
	}
	if len(args) == 0 {
		return nil
	}
	return args[:1]
}

// scriptCommands returns the commands the store's Lua scripts can run
// (redis.call and redis.pcall in store/redis/lua/*.lua and in the scripts
// its Go files hold), lower case.
func scriptCommands(t *testing.T) []string {
	t.Helper()
	lua, err := filepath.Glob("../../store/redis/lua/*.lua")
	if err != nil || len(lua) < 5 {
		t.Fatalf("the store's scripts: %v %v", lua, err)
	}
	goFiles, err := filepath.Glob("../../store/redis/*.go")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`redis\.p?call\(\s*['"]([A-Za-z_]+)['"]`)
	var out []string
	for _, f := range append(lua, goFiles...) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			out = append(out, strings.ToLower(m[1]))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// keyMatches reports whether key matches an ACL key pattern: the
// documented ones are a literal prefix followed by '*'.
func keyMatches(pattern, key string) bool {
	prefix, ok := strings.CutSuffix(pattern, "*")
	return ok && !strings.ContainsAny(prefix, "*?[\\") && strings.HasPrefix(key, prefix)
}

// TestRedisACLDocumented runs sluice against a Redis whose only user for
// it is the one docs/operations.md documents (its ACL SETUSER lines, read
// from the file; on Cluster with the third line), with every kind of limit
// (each algorithm, a concurrency limit, a compat scg limit), the admin
// API's inspect, reset and overrides, readiness, and a SCRIPT FLUSH;
// on_error deny makes any command or key the user may not use a 503.
// MONITOR records what sluice sends and what its scripts run: the
// documented commands are exactly those, together with what the scripts
// can run; the documented key patterns are exactly those the keys used
// match; and ACL LOG holds no denial but the documented CONFIG GET.
func TestRedisACLDocumented(t *testing.T) {
	t.Parallel()
	acl := documentedACL(t)
	t.Run("standalone", func(t *testing.T) {
		t.Parallel()
		srv := redistest.NewServer(t, redistest.ServerOptions{})
		testDocumentedACL(t, acl[:2], []*redistest.Server{srv}, fmt.Sprintf("{addrs: [%q]", srv.Addr()))
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		c := redistest.NewCluster(t, redistest.ClusterOptions{})
		addrs := make([]string, len(c.Addrs()))
		for i, a := range c.Addrs() {
			addrs[i] = strconv.Quote(a)
		}
		testDocumentedACL(t, acl, c.Masters, "{mode: cluster, addrs: ["+strings.Join(addrs, ", ")+"]")
	})
}

// testDocumentedACL sets up the user of acl on each of nodes, runs sluice
// with store.redis redis (an open flow mapping, completed with the user)
// and checks what the nodes record.
func testDocumentedACL(t *testing.T, acl [][]string, nodes []*redistest.Server, redis string) {
	const password = "acl-test-pw"
	for _, srv := range nodes {
		for _, words := range acl {
			args := []any{"ACL", "SETUSER"}
			for _, w := range words[2:] { // words[:2] is "ACL SETUSER"
				args = append(args, strings.ReplaceAll(w, ">PASSWORD", ">"+password))
			}
			if _, err := srv.Do(args...); err != nil {
				t.Fatalf("%s: %v", strings.Join(words, " "), err)
			}
		}
	}
	user := acl[0][2]
	var mons []*redistest.Monitor
	for _, srv := range nodes {
		mon, err := srv.Monitor()
		if err != nil {
			t.Fatal(err)
		}
		defer mon.Close()
		mons = append(mons, mon)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	p := start(t, fmt.Sprintf(`
server:
  listen: "127.0.0.1:0"
  shutdown_timeout: 10s
admin:
  listen: "127.0.0.1:0"
  token: "e2e-token"
store:
  type: redis
  timeout: 500ms
  on_error: deny
  redis: %s, username: %q, password: %q}
policies:
  token_bucket:   {algorithm: token_bucket,   capacity: 5, rate: 0.001}
  leaky_bucket:   {algorithm: leaky_bucket,   capacity: 5, rate: 0.001}
  fixed_window:   {algorithm: fixed_window,   limit: 5, window: 24h}
  sliding_log:    {algorithm: sliding_log,    limit: 5, window: 24h}
  sliding_window: {algorithm: sliding_window, limit: 5, window: 24h}
  gcra:           {algorithm: gcra,           rate: 0.001, burst: 5}
  vip:            {algorithm: token_bucket,   capacity: 50, rate: 1}
  in-flight:      {algorithm: concurrency,    limit: 5}
  scg:            {algorithm: token_bucket,   capacity: 5, rate: 1, compat: scg}
routes:
  - id: all
    match: {path: /all/**}
    upstream: %q
    limits:
      - {policy: token_bucket, key: header:X-User-Id}
      - {policy: leaky_bucket, key: header:X-User-Id}
      - {policy: fixed_window, key: header:X-User-Id}
      - {policy: sliding_log, key: header:X-User-Id}
      - {policy: sliding_window, key: header:X-User-Id}
      - {policy: gcra, key: header:X-User-Id}
      - {policy: in-flight, key: header:X-User-Id}
  - id: orders
    match: {path: /orders/**}
    upstream: %q
    limits:
      - {policy: scg, key: header:X-User-Id, scg_route_id: orders, headers: scg}
`, redis, user, password, up.URL, up.URL))

	check := func(what string, r response, codes ...int) {
		t.Helper()
		if !slices.Contains(codes, r.code) {
			t.Fatalf("%s: %d %s, want %v; sluice logs:\n%s", what, r.code, r.body, codes, p.logs)
		}
	}
	check("readyz", get(t, p.admin+"/readyz"), 200)
	for i := range 6 {
		check("all", get(t, p.base+"/all/x", "X-User-Id", "u1"), 200, 429)
		check("orders", get(t, p.base+"/orders/x", "X-User-Id", "u1"), 200, 429)
		if i == 2 {
			// A flushed script cache: NOSCRIPT, then SCRIPT LOAD.
			for _, srv := range nodes {
				if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, path := range []string{"/admin/v1/limits/all/u1", "/admin/v1/limits/orders/u1"} {
		check("inspect "+path, get(t, p.admin+path, auth...), 200)
		check("reset "+path, do(t, "DELETE", p.admin+path, nil, auth...), 204)
	}
	check("override", do(t, "PUT", p.admin+"/admin/v1/overrides/all/u3", strings.NewReader(`{"policy":"vip"}`), auth...), 200)
	check("with override", get(t, p.base+"/all/x", "X-User-Id", "u3"), 200)
	check("remove override", do(t, "DELETE", p.admin+"/admin/v1/overrides/all/u3", nil, auth...), 204)

	// Record until the idle connection's keep-alive PING has been seen.
	recorded, keys := map[string]bool{}, map[string]bool{}
	for deadline := time.Now().Add(60 * time.Second); !recorded["ping"]; {
		if time.Now().After(deadline) {
			t.Fatalf("no keep-alive PING within 60 s; recorded %v", slices.Sorted(maps.Keys(recorded)))
		}
		var lines []string
		for _, mon := range mons {
			ls, err := mon.Lines(ctx)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, ls...)
		}
		for _, l := range lines {
			_, words, err := monitorCommand(l)
			if err != nil {
				t.Fatal(err)
			}
			name := commandName(words)
			if name == "script|flush" {
				continue // the test's own
			}
			recorded[name] = true
			for _, k := range commandKeys(words) {
				keys[k] = true
			}
		}
		time.Sleep(100 * time.Millisecond) // polling MONITOR
	}

	var docCmds, docPatterns []string
	for _, words := range acl {
		c, pt := aclRules(words)
		docCmds, docPatterns = append(docCmds, c...), append(docPatterns, pt...)
	}
	slices.Sort(docCmds)
	// The commands: what sluice sent and its scripts ran, and what else
	// its scripts can run.
	want := slices.Collect(maps.Keys(recorded))
	want = append(want, scriptCommands(t)...)
	slices.Sort(want)
	want = slices.Compact(want)
	if !slices.Equal(docCmds, want) {
		t.Errorf("%s's ACL allows commands %v;\nsluice sent and its scripts ran %v, and its scripts can run %v:\nwant %v",
			aclDoc, docCmds, slices.Sorted(maps.Keys(recorded)), scriptCommands(t), want)
	}
	// The keys: each documented pattern is used, and each key is covered.
	used := map[string]bool{}
	for k := range keys {
		covered := false
		for _, pt := range docPatterns {
			if keyMatches(pt, k) {
				covered, used[pt] = true, true
			}
		}
		if !covered {
			t.Errorf("key %q matches none of the documented patterns %v", k, docPatterns)
		}
	}
	for _, pt := range docPatterns {
		if !used[pt] {
			t.Errorf("documented key pattern %q matches no key sluice used", pt)
		}
	}
	// The one denial: CONFIG GET maxmemory-policy.
	denied := map[string]bool{}
	var logs []any
	for _, srv := range nodes {
		logv, err := srv.Do("ACL", "LOG")
		if err != nil {
			t.Fatal(err)
		}
		entries, _ := logv.([]any)
		logs = append(logs, entries...)
		for _, e := range entries {
			fields, _ := e.([]any)
			for i := 0; i+1 < len(fields); i += 2 {
				if fields[i] == "object" {
					denied[fmt.Sprint(fields[i+1])] = true
				}
			}
		}
	}
	if got := slices.Sorted(maps.Keys(denied)); !slices.Equal(got, []string{"config|get"}) {
		t.Errorf("ACL LOG denied %v (%v), want only config|get", got, logs)
	}
}
