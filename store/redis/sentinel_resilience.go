package redis

// Sentinel mode's checks on top of rueidis (the behaviour users see is in
// docs/operations.md, "Sentinel"; docs/reliability.md rows C2 and C3 test it).
//
// rueidis checks ROLE when it switches to the master the sentinels name
// (at start, on +switch-master and on each periodic refresh), but not when
// a connection to the master it already uses breaks and it redials the
// same address. That address may by then hold a demoted master (a
// replica: every write fails READONLY) or a stale master that came back
// claiming role:master while the sentinels name another (writes to it are
// lost). And rueidis does not react to READONLY at all: it stays on a
// demoted master until the sentinels' event or the next periodic refresh.
// So in Sentinel mode the store
//
//   - checks every connection it dials (sentinelDial): ROLE must say master
//     (or sentinel, for the connections to the sentinels), and the sentinels
//     must name this address as the master: the sentinels are asked at
//     once; a master one of them is failing over is refused, and otherwise
//     the answer with the highest config epoch, their newest view, decides
//     (right after a failover the sentinels that did not lead it still name
//     the old master, which may be back as a stale one). When no
//     sentinel answers, the master is accepted: an outage of the sentinels
//     alone must not take Redis away. A refused dial fails the call as a
//     "connection" error, and rueidis asks the next sentinel;
//   - re-resolves the master when a call gets READONLY or a refused dial
//     (guarded): a new client asks the sentinels and replaces the current
//     one, at most once per resolveInterval; the old client is closed once
//     the calls in flight on it are over.
//
// A least-privilege ACL user (+@all -@dangerous) may not run ROLE, and
// rueidis' Sentinel client cannot work without it. When a data node answers
// ROLE with NOPERM, the store warns once and uses direct clients from then
// on: it asks the sentinels for the master's address and connects to it as
// to a standalone server, re-asking every sentinelRefresh and on READONLY
// or a refused dial. The dial check then rests on the sentinels naming the
// address, and a demoted master that they still name is left on the first
// READONLY of a write.

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// sentinelRefresh is how often the sentinels are re-asked for the master
// besides their events (a variable for tests: 0 turns it off).
var sentinelRefresh = 2 * time.Second

// resolveInterval is the least time between two re-resolutions of the
// master after READONLY or a refused dial.
const resolveInterval = time.Second

// errWrongRole is wrapped by the error of a dial refused because the server
// is not the master the sentinels name. ErrorKind reports it as
// "connection".
var errWrongRole = errors.New("not the sentinels' master")

// guarded is the Sentinel-mode client: it re-resolves the master when a
// reply says the server is no longer (or never was) the master.
type guarded struct {
	rueidis.Client
	s    *Store
	addr string // the master's address for a direct client; "" for rueidis' Sentinel client
}

func (g *guarded) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	r := g.Client.Do(ctx, cmd)
	g.check(r.Error())
	return r
}

func (g *guarded) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	rs := g.Client.DoMulti(ctx, cmds...)
	for _, r := range rs {
		if g.check(r.Error()) {
			break
		}
	}
	return rs
}

// check starts a re-resolution if err means the wrong server, and reports
// whether it did.
func (g *guarded) check(err error) bool {
	if err == nil || !(isReadOnly(err) || errors.Is(err, errWrongRole)) {
		return false
	}
	g.s.reresolve(g)
	return true
}

// isReadOnly reports whether err is a READONLY reply (a replica, or a
// master demoted since the connection was made).
func isReadOnly(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && strings.HasPrefix(re.Error(), "READONLY")
}

// reresolve replaces the client old (if it is still the current one) by a
// new one, built in the background: rueidis has no way to make a Sentinel
// client ask the sentinels now.
func (s *Store) reresolve(old *guarded) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.cur.Load()
	if s.closed || s.resolving || cur == nil || cur.c != rueidis.Client(old) || time.Since(s.lastResolve) < resolveInterval {
		return
	}
	s.resolving, s.lastResolve = true, time.Now()
	s.resolves.Add(1)
	s.wg.Go(func() {
		nc, err := s.newClient()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.resolving = false
		if err != nil || s.closed || s.cur.Load() != cur {
			if nc != nil {
				nc.Close()
			}
			return
		}
		s.cur.Store(&conn{c: nc})
		// Calls in flight on the old client end within the Timeout (a
		// background refund within another): close it after both.
		var t *time.Timer
		t = time.AfterFunc(2*s.timeout+time.Second, func() {
			s.mu.Lock()
			delete(s.retired, t)
			s.mu.Unlock()
			old.Client.Close()
		})
		if s.retired == nil {
			s.retired = make(map[*time.Timer]rueidis.Client)
		}
		s.retired[t] = old.Client
	})
}

// closeRetired closes the clients replaced by reresolve that are still
// waiting out their grace period. s.mu is not held.
func (s *Store) closeRetired() {
	s.mu.Lock()
	var cs []rueidis.Client
	for t, c := range s.retired {
		if t.Stop() {
			cs = append(cs, c)
		}
	}
	s.retired = nil
	s.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
}

// sentinelDial is the Sentinel-mode DialCtxFn: it dials like rueidis, then
// accepts the connection only from a sentinel, or from a master that the
// sentinels name.
func (s *Store) sentinelDial(ctx context.Context, dst string, d *net.Dialer, cfg *tls.Config) (net.Conn, error) {
	c, err := dialConn(ctx, dst, d, cfg)
	if err != nil {
		return nil, err
	}
	if err := s.checkRole(ctx, c, dst, d.Timeout); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func dialConn(ctx context.Context, dst string, d *net.Dialer, cfg *tls.Config) (net.Conn, error) {
	if cfg != nil {
		td := tls.Dialer{NetDialer: d, Config: cfg}
		return td.DialContext(ctx, "tcp", dst)
	}
	return d.DialContext(ctx, "tcp", dst)
}

// checkRole asks c (just dialed to dst) for its ROLE before rueidis uses it.
func (s *Store) checkRole(ctx context.Context, c net.Conn, dst string, timeout time.Duration) error {
	deadline := time.Now().Add(max(timeout, 100*time.Millisecond))
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.SetDeadline(deadline)
	defer c.SetDeadline(time.Time{})
	r := bufio.NewReader(c)
	v, err := roundTrip(c, r, "ROLE")
	if isReply(err, "NOAUTH") {
		if err := s.authAny(c, r, dst); err != nil {
			return fmt.Errorf("role check: auth: %w", err)
		}
		v, err = roundTrip(c, r, "ROLE")
	}
	role := ""
	if isReply(err, "NOPERM") {
		// The user may not run ROLE: a sentinel still answers SENTINEL
		// commands, which a data node does not know.
		if a, _ := askMaster(c, r, s.copt.Sentinel.MasterSet); a != "" {
			return nil
		}
		s.noteRoleDenied(dst)
		role = "unknown"
	} else if err != nil {
		return fmt.Errorf("role check: %w", err)
	}
	if arr, _ := v.([]any); len(arr) > 0 {
		role, _ = arr[0].(string)
	}
	switch role {
	case "sentinel":
		return nil
	case "master", "unknown":
		if named, other := s.sentinelsName(ctx, dst, deadline); !named {
			return fmt.Errorf("redis store: %s says role %s, but the sentinels name %s: %w", dst, role, other, errWrongRole)
		}
		return nil
	default:
		return fmt.Errorf("redis store: %s has role %q: %w", dst, role, errWrongRole)
	}
}

// isReply reports whether err is an error reply starting with prefix.
func isReply(err error, prefix string) bool {
	var re respError
	return errors.As(err, &re) && strings.HasPrefix(string(re), prefix)
}

// authAny authenticates c with the first credentials it takes: the data
// nodes' or the sentinels' (the dial does not tell which kind dst is; a
// configured sentinel address tries the sentinels' first).
func (s *Store) authAny(c net.Conn, r *bufio.Reader, dst string) error {
	creds := [][2]string{{s.copt.Username, s.copt.Password}, {s.copt.Sentinel.Username, s.copt.Sentinel.Password}}
	if slices.Contains(s.copt.InitAddress, dst) {
		creds[0], creds[1] = creds[1], creds[0]
	}
	var err error = respError("NOAUTH no password configured")
	for _, cred := range creds {
		if cred[1] == "" {
			continue
		}
		if err = auth(c, r, cred[0], cred[1]); err == nil {
			return nil
		}
	}
	return err
}

// auth sends AUTH [user] password on c.
func auth(c net.Conn, r *bufio.Reader, user, password string) error {
	args := []string{"AUTH", password}
	if user != "" {
		args = []string{"AUTH", user, password}
	}
	_, err := roundTrip(c, r, args...)
	return err
}

// noteRoleDenied records that the user may not run ROLE on the data nodes,
// which turns the store to direct clients, and warns the first time.
func (s *Store) noteRoleDenied(dst string) {
	if s.roleDenied.Swap(true) {
		return
	}
	s.log.Warn("redis store: the redis user may not run ROLE (NOPERM), so the master's role cannot be verified when connecting; "+
		"sluice asks the sentinels for the master itself and still leaves a server the sentinels do not name, or one whose writes answer READONLY",
		"addr", dst, "user", s.copt.Username, "master_name", s.copt.Sentinel.MasterSet)
}

// askMaster asks the sentinel on c for the address of master set name; ""
// when it does not answer with one.
func askMaster(c net.Conn, r *bufio.Reader, name string) (string, error) {
	v, err := roundTrip(c, r, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", name)
	if err != nil {
		return "", err
	}
	arr, _ := v.([]any)
	if len(arr) != 2 {
		return "", fmt.Errorf("no master named %q", name)
	}
	host, _ := arr[0].(string)
	port, _ := arr[1].(string)
	return net.JoinHostPort(host, port), nil
}

// sentinelAnswer is one sentinel's view of the master.
type sentinelAnswer struct {
	// master is the address the sentinel gives clients for the master
	// (GET-MASTER-ADDR-BY-NAME): during a failover that has promoted a
	// replica, the promoted one's, before the sentinel's configuration
	// switches to it at the failover's end.
	master string
	// configured is the master of the sentinel's configuration (SENTINEL
	// MASTER's ip and port), epoch that configuration's config epoch, and
	// failing whether the sentinel is failing that master over
	// (failover_in_progress). epoch is -1 and configured empty when the
	// sentinel's user may not run SENTINEL MASTER.
	configured string
	epoch      int64
	failing    bool
}

// newer reports whether a is a newer view than b: a higher config epoch,
// or the same one in a failover, which is about to move past it.
func (a sentinelAnswer) newer(b sentinelAnswer) bool {
	return a.epoch > b.epoch || a.epoch == b.epoch && a.failing && !b.failing
}

// askMasterEpoch asks the sentinel on c about master set name:
// GET-MASTER-ADDR-BY-NAME, and SENTINEL MASTER for its configuration, which
// a restricted sentinel user may not run (then epoch is -1).
func askMasterEpoch(c net.Conn, r *bufio.Reader, name string) (sentinelAnswer, error) {
	master, err := askMaster(c, r, name)
	if err != nil {
		return sentinelAnswer{}, err
	}
	a := sentinelAnswer{master: master, epoch: -1}
	v, err := roundTrip(c, r, "SENTINEL", "MASTER", name)
	var re respError
	if errors.As(err, &re) {
		return a, nil
	}
	if err != nil {
		return sentinelAnswer{}, err
	}
	arr, _ := v.([]any)
	fields := make(map[string]string, len(arr)/2)
	for i := 0; i+1 < len(arr); i += 2 {
		k, _ := arr[i].(string)
		v, _ := arr[i+1].(string)
		fields[k] = v
	}
	epoch, err := strconv.ParseInt(fields["config-epoch"], 10, 64)
	if err != nil || fields["ip"] == "" || fields["port"] == "" {
		return a, nil
	}
	a.configured, a.epoch = net.JoinHostPort(fields["ip"], fields["port"]), epoch
	a.failing = slices.Contains(strings.Split(fields["flags"], ","), "failover_in_progress")
	return a, nil
}

// sentinelMaster asks the sentinel at addr about the master
// (askMasterEpoch), authenticating with the sentinels' credentials.
func (s *Store) sentinelMaster(ctx context.Context, addr string, deadline time.Time) (sentinelAnswer, error) {
	d := s.copt.Sentinel.Dialer
	dctx, cancel := context.WithDeadline(ctx, deadline)
	c, err := dialConn(dctx, addr, &d, s.copt.Sentinel.TLSConfig)
	cancel()
	if err != nil {
		return sentinelAnswer{}, err
	}
	defer c.Close()
	c.SetDeadline(deadline)
	r := bufio.NewReader(c)
	if so := s.copt.Sentinel; so.Password != "" {
		if err := auth(c, r, so.Username, so.Password); err != nil {
			return sentinelAnswer{}, fmt.Errorf("auth to sentinel %s: %w", addr, err)
		}
	}
	return askMasterEpoch(c, r, s.copt.Sentinel.MasterSet)
}

// askSentinels asks every configured sentinel for the master at once, and
// returns the answers in the order of the configuration and the errors of
// those that did not answer.
func (s *Store) askSentinels(ctx context.Context, deadline time.Time) ([]sentinelAnswer, []error) {
	addrs := s.copt.InitAddress
	answers, errs := make([]sentinelAnswer, len(addrs)), make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Go(func() { answers[i], errs[i] = s.sentinelMaster(ctx, addr, deadline) })
	}
	wg.Wait()
	var got []sentinelAnswer
	var failed []error
	for i := range addrs {
		if errs[i] != nil {
			failed = append(failed, fmt.Errorf("sentinel %s: %w", addrs[i], errs[i]))
			continue
		}
		got = append(got, answers[i])
	}
	return got, failed
}

// newest returns the answer of the sentinels' newest view of the master
// (sentinelAnswer.newer), the first among equals. Sentinels disagree for a
// moment after a failover: the others learn the new master from the one
// that led it, and until then name the old one under the old config
// epoch. answers must not be empty.
func newest(answers []sentinelAnswer) sentinelAnswer {
	best := answers[0]
	for _, a := range answers[1:] {
		if a.newer(best) {
			best = a
		}
	}
	return best
}

// sentinelsName reports whether the sentinels name dst as the master:
//
//   - no, when a sentinel is failing over the master dst is (it is down, or
//     about to be replaced: a stale master back from a crash is one);
//   - else the newest view among those that answer decides;
//   - when no sentinel gives its configuration (their user may not run
//     SENTINEL MASTER), one that names dst is enough, as rueidis dials the
//     address one of them named;
//   - when no sentinel answers, yes: an outage of the sentinels alone must
//     not take Redis away.
//
// When not, other is the master they name.
func (s *Store) sentinelsName(ctx context.Context, dst string, deadline time.Time) (named bool, other string) {
	answers, _ := s.askSentinels(ctx, deadline)
	if len(answers) == 0 {
		return true, ""
	}
	best := newest(answers)
	for _, a := range answers {
		if a.failing && a.configured == dst {
			return false, a.master
		}
	}
	if best.epoch < 0 && slices.ContainsFunc(answers, func(a sentinelAnswer) bool { return a.master == dst }) {
		return true, ""
	}
	if best.master == dst {
		return true, ""
	}
	return false, best.master
}

// newClient builds a client: rueidis' own for Standalone and Cluster, and
// for Sentinel a guarded one, direct once the user may not run ROLE.
func (s *Store) newClient() (rueidis.Client, error) {
	if s.mode != Sentinel {
		return rueidis.NewClient(s.copt)
	}
	if !s.roleDenied.Load() {
		c, err := rueidis.NewClient(s.copt)
		if err == nil {
			return &guarded{Client: c, s: s}, nil
		}
		if !s.roleDenied.Load() {
			return nil, err
		}
	}
	return s.newDirect()
}

// newDirect asks the sentinels for the master (their newest view) and
// returns a client of that server alone (its dials still checked by
// sentinelDial).
func (s *Store) newDirect() (rueidis.Client, error) {
	deadline := time.Now().Add(s.copt.Dialer.Timeout)
	answers, errs := s.askSentinels(context.Background(), deadline)
	if len(answers) == 0 {
		return nil, fmt.Errorf("ask the sentinels for master %q: %w", s.copt.Sentinel.MasterSet, errors.Join(errs...))
	}
	addr := newest(answers).master
	opt := s.copt
	opt.InitAddress = []string{addr}
	opt.Sentinel = rueidis.SentinelOption{}
	opt.ForceSingleClient = true
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, err
	}
	s.watchOnce.Do(func() { s.wg.Go(s.watch) })
	return &guarded{Client: c, s: s, addr: addr}, nil
}

// watch re-asks the sentinels every sentinelRefresh while the store uses a
// direct client, and re-resolves when they name another master: a direct
// client hears no +switch-master. It returns when the store closes.
func (s *Store) watch() {
	if sentinelRefresh <= 0 {
		return
	}
	t := time.NewTicker(sentinelRefresh)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		cur := s.cur.Load()
		if cur == nil {
			continue
		}
		g, ok := cur.c.(*guarded)
		if !ok || g.addr == "" {
			continue
		}
		deadline := time.Now().Add(s.copt.Dialer.Timeout)
		if answers, _ := s.askSentinels(context.Background(), deadline); len(answers) > 0 && newest(answers).master != g.addr {
			s.reresolve(g)
		}
	}
}

// respError is an error reply read by readResp.
type respError string

func (e respError) Error() string { return string(e) }

// roundTrip writes one command and reads its reply (RESP2).
func roundTrip(c net.Conn, r *bufio.Reader, args ...string) (any, error) {
	var b []byte
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, "\r\n"...)
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, "\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	if _, err := c.Write(b); err != nil {
		return nil, err
	}
	return readResp(r, 0)
}

// readResp reads one whole RESP2 reply: strings for simple and bulk
// strings, int64, nil, []any, or a respError.
func readResp(r *bufio.Reader, depth int) (any, error) {
	if depth > 8 {
		return nil, errors.New("reply nested too deep")
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("bad reply line %q", line)
	}
	kind, rest := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return rest, nil
	case '-':
		return nil, respError(rest)
	case ':':
		return strconv.ParseInt(rest, 10, 64)
	case '$', '*':
		n, err := strconv.Atoi(rest)
		if err != nil || n > 1<<20 {
			return nil, fmt.Errorf("bad reply length %q", rest)
		}
		if n < 0 {
			return nil, nil
		}
		if kind == '$' {
			b := make([]byte, n+2)
			if _, err := io.ReadFull(r, b); err != nil {
				return nil, err
			}
			return string(b[:n]), nil
		}
		arr := make([]any, n)
		for i := range arr {
			v, err := readResp(r, depth+1)
			var re respError
			if err != nil && !errors.As(err, &re) {
				return nil, err
			}
			arr[i] = v
		}
		return arr, nil
	}
	return nil, fmt.Errorf("unknown reply type %q", kind)
}
