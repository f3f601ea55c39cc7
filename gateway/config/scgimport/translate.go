package scgimport

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-gw/sluice/httplimit"
)

// File is one Spring Boot configuration file to translate.
type File struct {
	// Name is the file's name as it appears in notes; its extension
	// (.yml, .yaml or .properties) says how it is read, and a name
	// <config name>-<profile>.<ext> (application-dev.yml, see
	// Options.ConfigNames) makes it specific to that profile. Any other
	// name (gateway-config.yml) is a file of no profile, read as given.
	Name string
	// Data is the file's content.
	Data []byte
}

// Options tunes a translation.
type Options struct {
	// Profiles are the active Spring profiles. Empty means the files'
	// spring.profiles.active.
	Profiles []string
	// ConfigNames are Spring Boot's spring.config.name values, which name
	// the profile-specific files: with "gateway", gateway-dev.yml belongs
	// to profile dev. Empty means "application", Spring Boot's default.
	ConfigNames []string
	// KeyResolvers maps a key resolver bean name (as in "#{@userKeyResolver}")
	// to a sluice key (header:X-User-Id, query:userId, ip, path, ...).
	KeyResolvers map[string]string
	// Native writes sluice's own token buckets instead of compat: scg ones:
	// the budgets are then no longer shared with SCG instances.
	Native bool
	// SCGVersion is the version of the SCG instances whose budgets the
	// limits share, such as "4.1.9" or "4.2" (ParseSCGVersion): it picks
	// the key layout, compat scg-4.1 before 4.2.0, compat scg (keys naming
	// the route) from 4.2.0 on. Empty assumes 4.2.0 or later and says so in
	// a note, unless the files' spring.cloud.gateway.server.webflux prefix
	// (SCG 4.3.0 and later) shows it.
	SCGVersion string
}

// Note is one part of the input the translation leaves out or changes.
type Note struct {
	File    string
	Line    int
	Message string
	// Info marks a note that does not make the translation partial: a
	// setting with no bearing on routing and limiting, or an assumption
	// the output states.
	Info bool
}

func (n Note) String() string {
	kind := "not translated"
	if n.Info {
		kind = "note"
	}
	return fmt.Sprintf("%s:%d: %s: %s", n.File, n.Line, kind, n.Message)
}

// Result is a translation.
type Result struct {
	// Config is the sluice configuration, YAML.
	Config string
	// Notes lists what was left out or changed, in input order, then what
	// the key layout of compat limits assumes or leaves out.
	Notes []Note
}

// Complete reports whether every part was translated: no note other than
// Info ones.
func (r *Result) Complete() bool {
	for _, n := range r.Notes {
		if !n.Info {
			return false
		}
	}
	return true
}

// translator holds a translation's state.
type translator struct {
	o        Options
	root     *node
	notes    []Note
	policies []policy
	routes   []route
	ids      map[string]bool
	store    store
	listen   string
	profiles []string
	files    []string
	// legacy is true when the limits follow SCG up to 4.1.x (compat
	// scg-4.1), whose keys do not name the route.
	legacy bool
	// leftOut says which files were left out as profile files of
	// profiles that are not active.
	leftOut []string
}

// inactiveProfile says that file was left out as a profile file of
// profile p, which is not active.
func inactiveProfile(file, p string) string {
	return fmt.Sprintf("%s is a file of profile %s, which is not active: left out (read it with --profile %s)", filepath.Base(file), p, p)
}

type policy struct {
	name        string
	burst, rate int64
}

type route struct {
	id       string
	path     string
	methods  []string
	host     string
	headers  [][2]string
	query    [][2]string
	upstream string
	// lb is the service name of an SCG lb://NAME uri: the route forwards
	// to a pool whose one target is the environment variable lbVar (a
	// placeholder sluice check refuses until it is set or replaced), and
	// upstream holds only the base path.
	lb, lbVar string
	strip     int
	limits    []limit
	comment   string
}

type limit struct {
	policy, key string
	cost        int64
	onEmpty     string
	headers     bool
	comment     string
	// scgRoute is the SCG route's id, as SCG 4.2.0 and later write it in
	// the keys; noID says the route has none (SCG makes one up), and then
	// scgRoute is the sluice route's id.
	scgRoute string
	noID     bool
	node     *node
}

type store struct {
	mode, master               string
	addrs                      []string
	username, password         string
	sentinelUser, sentinelPass string
	db                         int64
	tls                        bool
}

func (t *translator) note(n *node, format string, args ...any) {
	t.notes = append(t.notes, Note{File: n.file, Line: n.line, Message: fmt.Sprintf(format, args...)})
}

func (t *translator) info(n *node, format string, args ...any) {
	t.notes = append(t.notes, Note{File: n.file, Line: n.line, Message: fmt.Sprintf(format, args...), Info: true})
}

// Translate reads the files (in order: a later file, or a later document,
// overrides an earlier one; profile-specific files come last) and returns
// the sluice configuration for the active profiles. An error means a file
// could not be read at all.
func Translate(files []File, o Options) (*Result, error) {
	type doc struct {
		document
		fileProfile string
	}
	var docs []doc
	names := o.ConfigNames
	if len(names) == 0 {
		names = []string{"application"}
	}
	for _, f := range files {
		ds, err := load(f.Name, f.Data)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			docs = append(docs, doc{document: d, fileProfile: fileProfile(f.Name, names)})
		}
	}
	t := &translator{o: o, ids: map[string]bool{}}
	for _, f := range files {
		t.files = append(t.files, f.Name)
	}
	// A document's own profile condition.
	for i := range docs {
		d := &docs[i]
		for _, path := range []string{"spring.config.activate.onprofile", "spring.profiles"} {
			if n := d.root.get(path); n != nil {
				if s, ok := n.text(); ok {
					d.profile, d.profLn = s, n.line
				}
			}
		}
	}
	active := o.Profiles
	if len(active) == 0 {
		for _, d := range docs {
			if d.profile != "" || d.fileProfile != "" {
				continue
			}
			if n := d.root.get("spring.profiles.active"); n != nil {
				if s, ok := n.text(); ok {
					active = nil
					for _, p := range strings.Split(s, ",") {
						if p = strings.TrimSpace(p); p != "" {
							active = append(active, p)
						}
					}
				}
			}
		}
	}
	t.profiles = active
	// A profile file of a profile that is not active is left out, as
	// Spring Boot leaves it out; say so, with the flag that reads it.
	for _, f := range files {
		if p := fileProfile(f.Name, names); p != "" && !slices.Contains(active, p) {
			t.info(&node{file: f.Name, line: 1}, "%s", inactiveProfile(f.Name, p))
			t.leftOut = append(t.leftOut, inactiveProfile(f.Name, p))
		}
	}
	// Generic files first, in order; then each active profile's files.
	var order []document
	for _, d := range docs {
		if d.fileProfile == "" {
			order = append(order, d.document)
		}
	}
	for _, p := range active {
		for _, d := range docs {
			if d.fileProfile == p {
				order = append(order, d.document)
			}
		}
	}
	for _, d := range order {
		if d.profile != "" {
			match, ok := matchProfiles(d.profile, active)
			if !ok {
				t.note(&node{file: d.file, line: d.profLn}, "profile expression %q cannot be read; document left out", d.profile)
				continue
			}
			if !match {
				continue
			}
		}
		t.root = merge(t.root, d.root)
	}
	if t.root == nil {
		t.root = newMap("", 0)
	}
	t.translate()
	t.layout()
	return &Result{Config: t.write(), Notes: t.notes}, nil
}

// layout picks the key layout of the compat limits from Options.SCGVersion
// or the files, and states the SCG versions it assumes.
func (t *translator) layout() {
	if t.o.Native || len(t.policies) == 0 {
		return
	}
	old, cur := t.gateway()
	switch legacy, err := ParseSCGVersion(t.o.SCGVersion); {
	case err == nil && t.o.SCGVersion != "":
		t.legacy = legacy
		if legacy && cur != nil {
			t.info(cur, "--scg-version %s, yet spring.cloud.gateway.server.webflux is the prefix of SCG 4.3.0 and later; the limits follow --scg-version", t.o.SCGVersion)
		}
	case cur != nil:
		t.info(cur, "compat scg: keys request_rate_limiter.{<route id>.<key>}, as SCG 4.2.0 and later write them (spring.cloud.gateway.server.webflux is the prefix of SCG 4.3.0 and later)")
	default:
		t.info(pick(old, t.root), "compat scg assumes SCG 4.2.0 or later, whose keys name the route (request_rate_limiter.{<route id>.<key>}); for SCG 4.1.x or earlier pass --scg-version 4.1 (compat scg-4.1, keys request_rate_limiter.{<key>}), or each fleet counts its own budget")
	}
	if t.legacy {
		return
	}
	warned := map[*node]bool{}
	for _, r := range t.routes {
		for _, l := range r.limits {
			if l.noID && !warned[l.node] {
				warned[l.node] = true
				t.note(l.node, "route %s has no id: SCG gives it a random UUID on every instance and at every start, and SCG 4.2.0 and later put that id in the rate limiter's keys, so no budget can be shared with SCG; give the route an id in SCG and write it as scg_route_id here", r.id)
			}
		}
	}
}

// ParseSCGVersion reads an SCG version, "4.1", "4.1.9", "v4.2.0" or
// "4.2.0-M2", or the Spring Cloud release train that brings it ("2023.0",
// "2024.0.1"), and reports whether it writes the keys that do not name the
// route: SCG before 4.2.0 (and 4.2.0-M1), release trains before 2024.0,
// compat scg-4.1. Empty is no version: legacy false.
func ParseSCGVersion(v string) (legacy bool, err error) {
	if v == "" {
		return false, nil
	}
	m := versionRE.FindStringSubmatch(v)
	if m == nil {
		return false, fmt.Errorf("--scg-version %q: want a Spring Cloud Gateway version such as 4.1.9 or 4.2.0", v)
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	patch := 0
	if m[3] != "" {
		patch, _ = strconv.Atoi(m[3])
	}
	switch {
	case major >= 2020:
		// A Spring Cloud release train: 2024.0 brought SCG 4.2.0.
		return major < 2024, nil
	case major != 4:
		return major < 4, nil
	case minor != 2:
		return minor < 2, nil
	}
	// 4.2.0-M1 still wrote the old keys; 4.2.0-M2 was the first with the route.
	return patch == 0 && strings.EqualFold(m[4], "-M1"), nil
}

// versionRE matches an SCG version: major.minor[.patch][qualifier].
var versionRE = regexp.MustCompile(`^v?(\d+)\.(\d+)(?:\.(\d+))?([.-][A-Za-z0-9.-]+)?$`)

// gateway returns SCG's settings: spring.cloud.gateway.server.webflux laid
// over spring.cloud.gateway (its older prefix).
func (t *translator) gateway() (old, cur *node) {
	return t.root.get("spring.cloud.gateway"), t.root.get("spring.cloud.gateway.server.webflux")
}

// pick returns the first non-nil node.
func pick(ns ...*node) *node {
	for _, n := range ns {
		if n != nil {
			return n
		}
	}
	return nil
}

// getBoth returns path under the new prefix, else under the old one.
func (t *translator) getBoth(path string) *node {
	old, cur := t.gateway()
	return pick(cur.get(path), old.get(path))
}

func (t *translator) translate() {
	old, cur := t.gateway()
	t.unknownGatewayKeys(old, true)
	t.unknownGatewayKeys(cur, false)
	t.translateStore()
	t.translateServer()
	defaults := t.getBoth("defaultfilters").items()
	var routes []*node
	routes = append(routes, old.get("routes").items()...)
	routes = append(routes, cur.get("routes").items()...)
	for i, r := range routes {
		t.translateRoute(i, r, defaults)
	}
	if len(t.routes) == 0 {
		msg := "no spring.cloud.gateway routes found; sluice needs at least one route"
		if len(t.leftOut) > 0 {
			msg += " (" + strings.Join(t.leftOut, "; ") + ")"
		}
		t.note(pick(old, cur, t.root), "%s", msg)
	}
}

// knownGateway lists the gateway keys the translation reads.
var knownGateway = map[string]bool{"routes": true, "defaultfilters": true, "filter": true, "redisratelimiter": true, "enabled": true, "server": true}

func (t *translator) unknownGatewayKeys(gw *node, old bool) {
	if gw == nil || gw.m == nil {
		return
	}
	for _, k := range gw.keys {
		n := gw.m[k]
		switch {
		case k == "server" && old:
			if n.m != nil {
				for _, k2 := range n.keys {
					if k2 != "webflux" {
						t.note(n.m[k2], "spring.cloud.gateway.server.%s is not translated", n.raw[k2])
					}
				}
			}
		case k == "server":
			t.note(n, "spring.cloud.gateway.server.webflux.server is not translated")
		case k == "filter":
			for path, leaf := range n.flatten() {
				if path != "requestratelimiter.denyemptykey" && path != "requestratelimiter.emptykeystatuscode" {
					t.note(leaf, "gateway filter setting %q is not translated", path)
				}
			}
		case k == "redisratelimiter":
			for path, leaf := range n.flatten() {
				if path != "includeheaders" && !strings.HasPrefix(path, "config.") {
					t.note(leaf, "redis-rate-limiter setting %q is not translated (sluice sends SCG's header names)", path)
				}
			}
		case !knownGateway[k]:
			t.note(n, "spring.cloud.gateway setting %q is not translated", gw.raw[k])
		}
	}
}

// value resolves Spring placeholders: a ${name} naming a property of the
// files is replaced by its value; any other becomes sluice's environment
// reference, ${NAME} or ${NAME:-default}, NAME as Spring maps a property
// to an environment variable. A literal '$' is written "$$".
func (t *translator) value(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '$' && i+1 < len(s) && s[i+1] == '{' {
			j := strings.IndexByte(s[i:], '}')
			if j > 0 {
				inner := s[i+2 : i+j]
				name, def, hasDef := strings.Cut(inner, ":")
				if n := t.root.get(name); n != nil && strings.ContainsAny(name, ".") {
					if v, ok := n.text(); ok {
						b.WriteString(t.value(v))
						i += j
						continue
					}
				}
				env := envName(name)
				if hasDef {
					b.WriteString("${" + env + ":-" + strings.ReplaceAll(def, "$", "$$") + "}")
				} else {
					b.WriteString("${" + env + "}")
				}
				i += j
				continue
			}
		}
		if s[i] == '$' {
			b.WriteString("$$")
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// lbVar is the environment variable that stands for the instances of
// service name: LB_ and the name in upper case, every character other
// than a letter or a digit written '_'.
func lbVar(name string) string {
	b := []byte("LB_" + strings.ToUpper(name))
	for i := 3; i < len(b); i++ {
		if c := b[i]; (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			b[i] = '_'
		}
	}
	return string(b)
}

// envName is Spring Boot's environment variable for a property name:
// upper case, '.' to '_', '-' removed.
func envName(name string) string {
	name = strings.ReplaceAll(name, "-", "")
	name = strings.ReplaceAll(name, ".", "_")
	return strings.ToUpper(name)
}

func (t *translator) translateServer() {
	port := t.root.get("server.port")
	if port == nil {
		return
	}
	p, _ := port.text()
	host := ""
	if a := t.root.get("server.address"); a != nil {
		host, _ = a.text()
	}
	t.listen = net.JoinHostPort(host, t.value(p))
}

// translateStore reads spring.data.redis (Spring Boot 3) over spring.redis.
func (t *translator) translateStore() {
	r := merge(merge(nil, copyNode(t.root.get("spring.redis"))), copyNode(t.root.get("spring.data.redis")))
	s := store{mode: "standalone"}
	host, port := "localhost", "6379"
	if r == nil {
		t.info(t.root, "no spring.data.redis settings: Redis at localhost:6379, Spring Boot's default")
		s.addrs = []string{host + ":" + port}
		t.store = s
		return
	}
	str := func(path string) (string, *node) {
		n := r.get(path)
		if n == nil {
			return "", nil
		}
		v, ok := n.text()
		if !ok {
			t.note(n, "redis setting %s is not a value", path)
			return "", n
		}
		return t.value(v), n
	}
	if v, _ := str("host"); v != "" {
		host = v
	}
	if v, _ := str("port"); v != "" {
		port = v
	}
	s.password, _ = str("password")
	s.username, _ = str("username")
	if v, n := str("database"); v != "" {
		d, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.note(n, "redis database %q is not a number", v)
		}
		s.db = d
	}
	if v, _ := str("ssl.enabled"); v == "true" {
		s.tls = true
	}
	if n := r.get("ssl"); n != nil && n.isScalar && n.scalar == "true" {
		s.tls = true
	}
	if v, n := str("url"); v != "" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
			t.note(n, "redis url %q is not redis:// or rediss://", v)
		} else {
			s.tls = u.Scheme == "rediss"
			host, port = u.Hostname(), u.Port()
			if port == "" {
				port = "6379"
			}
			if u.User != nil {
				if pw, ok := u.User.Password(); ok {
					s.password = pw
					if u.User.Username() != "" && u.User.Username() != "default" {
						s.username = u.User.Username()
					}
				} else {
					s.password = u.User.Username()
				}
			}
			if db := strings.Trim(u.Path, "/"); db != "" {
				s.db, _ = strconv.ParseInt(db, 10, 64)
			}
		}
	}
	s.addrs = []string{hostPort(host, port)}
	if v, _ := str("sentinel.master"); v != "" {
		s.mode, s.master = "sentinel", v
		nodes, _ := str("sentinel.nodes")
		s.addrs = splitList(nodes)
		s.sentinelUser, _ = str("sentinel.username")
		s.sentinelPass, _ = str("sentinel.password")
	}
	if v, _ := str("cluster.nodes"); v != "" {
		s.mode, s.addrs = "cluster", splitList(v)
		s.db = 0
	}
	known := map[string]bool{"host": true, "port": true, "password": true, "username": true, "database": true, "url": true,
		"ssl": true, "ssl.enabled": true, "ssl.bundle": false, "sentinel.master": true, "sentinel.nodes": true, "sentinel.username": true,
		"sentinel.password": true, "cluster.nodes": true}
	for path, leaf := range r.flatten() {
		if !known[path] {
			t.info(leaf, "redis setting %q has no sluice counterpart and is ignored (sluice's store.timeout is its own)", path)
		}
	}
	t.store = s
}

// hostPort joins host and port; a host that is an environment reference
// is not bracketed.
func hostPort(host, port string) string {
	if strings.Contains(host, "${") {
		return host + ":" + port
	}
	return net.JoinHostPort(host, port)
}

// copyNode returns a deep copy of n, so that merging does not change it.
func copyNode(n *node) *node {
	if n == nil {
		return nil
	}
	c := *n
	if n.m != nil {
		c.m, c.raw, c.keys = map[string]*node{}, map[string]string{}, slices.Clone(n.keys)
		for k, v := range n.m {
			c.m[k], c.raw[k] = copyNode(v), n.raw[k]
		}
	}
	if n.list != nil {
		c.list = make([]*node, len(n.list))
		for i, v := range n.list {
			c.list[i] = copyNode(v)
		}
	}
	return &c
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// component is a predicate or filter: its name, its positional arguments
// (shortcut form or _genkey_N) and its named ones.
type component struct {
	n     *node
	name  string
	pos   []string
	named map[string]*node
}

func (t *translator) component(n *node, what string) (component, bool) {
	c := component{n: n, named: map[string]*node{}}
	if n.isScalar {
		name, args, has := strings.Cut(n.scalar, "=")
		c.name = strings.TrimSpace(name)
		if has {
			for _, a := range strings.Split(args, ",") {
				c.pos = append(c.pos, strings.TrimSpace(a))
			}
		}
		return c, c.name != ""
	}
	nm := n.get("name")
	if nm == nil {
		t.note(n, "%s without a name", what)
		return c, false
	}
	c.name, _ = nm.text()
	if args := n.get("args"); args != nil {
		flat := args.flatten()
		var gen []string
		for k := range flat {
			if strings.HasPrefix(k, "genkey") {
				gen = append(gen, k)
			}
		}
		slices.SortFunc(gen, func(a, b string) int {
			x, _ := strconv.Atoi(strings.TrimPrefix(a, "genkey"))
			y, _ := strconv.Atoi(strings.TrimPrefix(b, "genkey"))
			return x - y
		})
		for _, k := range gen {
			v, _ := flat[k].text()
			c.pos = append(c.pos, v)
			delete(flat, k)
		}
		c.named = flat
	}
	return c, true
}

// arg returns a named argument (any of the canonical names), or the
// positional one at i.
func (c component) arg(i int, names ...string) (string, *node, bool) {
	for _, nm := range names {
		if n, ok := c.named[nm]; ok {
			v, _ := n.text()
			return v, n, true
		}
	}
	if i >= 0 && i < len(c.pos) {
		return c.pos[i], c.n, true
	}
	return "", c.n, false
}

// list returns a list argument: the named one (a list or a
// comma-separated value), else every positional argument.
func (c component) list(names ...string) []string {
	for _, nm := range names {
		if n, ok := c.named[nm]; ok {
			v, _ := n.text()
			return splitList(v)
		}
	}
	return c.pos
}

var nameRE = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func (t *translator) routeID(i int, n *node) string {
	id := ""
	if idn := n.get("id"); idn != nil {
		id, _ = idn.text()
	}
	if id == "" {
		id = fmt.Sprintf("route-%d", i)
		t.info(n, "route without an id: named %s", id)
	}
	if clean := strings.Trim(nameRE.ReplaceAllString(id, "-"), "-"); clean != id {
		if clean == "" {
			clean = fmt.Sprintf("route-%d", i)
		}
		t.info(n, "route id %q written %q (sluice ids are letters, digits, '.', '_' and '-')", id, clean)
		id = clean
	}
	return t.unique(id)
}

// unique returns id, or id-2, id-3, ... if it is taken.
func (t *translator) unique(id string) string {
	base := id
	for k := 2; t.ids[id]; k++ {
		id = fmt.Sprintf("%s-%d", base, k)
	}
	return id
}

func (t *translator) translateRoute(i int, n *node, defaults []*node) {
	if n.m == nil {
		t.note(n, "route is not a mapping")
		return
	}
	id := t.routeID(i, n)
	scgID := ""
	if idn := n.get("id"); idn != nil {
		scgID, _ = idn.text()
	}
	for _, k := range n.keys {
		switch k {
		case "id", "uri", "predicates", "filters":
		case "order":
			t.info(n.m[k], "route order is not translated: sluice tries routes in file order, which follows SCG's order only if the file does")
		default:
			t.note(n.m[k], "route field %q is not translated", n.raw[k])
		}
	}
	r := route{id: id}
	// drop leaves the route out once all of it has been read (so that
	// every part that is not translated is listed).
	drop := false
	// uri: scheme, host and port; SCG ignores the URI's path.
	uriNode := pick(n.get("uri"), n)
	raw, _ := uriNode.text()
	u, err := url.Parse(raw)
	switch {
	case n.get("uri") == nil:
		t.note(n, "route %s has no uri; route left out", id)
		drop = true
	case err != nil || u.Host == "":
		t.note(uriNode, "route %s: uri %q is not an http(s) URL; route left out", id, raw)
		drop = true
	case u.Scheme == "lb":
		r.lb, r.lbVar = u.Host, lbVar(u.Hostname())
		t.note(uriNode, "route %s: %q is a load-balanced service name (sluice has no service discovery): its pool's target is the placeholder ${%s}, which sluice check refuses while it is not set; list the service's instances as the pool's targets (http://host:port, one per instance), or set %s to one URL", id, raw, r.lbVar, r.lbVar)
	case u.Scheme == "http" || u.Scheme == "https":
		r.upstream = u.Scheme + "://" + u.Host
	default:
		t.note(uriNode, "route %s: uri scheme %q is not supported (http, https); route left out", id, u.Scheme)
		drop = true
	}
	paths, hosts := []string{"/**"}, []string{""}
	for _, pn := range n.get("predicates").items() {
		c, ok := t.component(pn, "predicate")
		if !ok {
			continue
		}
		switch strings.ToLower(c.name) {
		case "path":
			ps := c.list("patterns", "pattern")
			if len(ps) > 1 && (ps[len(ps)-1] == "true" || ps[len(ps)-1] == "false") {
				ps = ps[:len(ps)-1]
			}
			var out []string
			for _, p := range ps {
				if sp, ok := sluicePath(p); ok {
					out = append(out, sp)
				} else {
					t.note(pn, "route %s: path pattern %q cannot be written as a sluice path (literal segments, *, {name}, and ** or {*name} last)", id, p)
				}
			}
			if len(out) == 0 {
				t.note(pn, "route %s: no usable path; route left out", id)
				drop = true
				continue
			}
			paths = out
		case "method":
			for _, m := range c.list("methods", "method") {
				r.methods = append(r.methods, strings.ToUpper(m))
			}
		case "host":
			var out []string
			for _, h := range c.list("patterns", "pattern") {
				h = strings.ToLower(h)
				if hh, _, err := net.SplitHostPort(h); err == nil {
					h = hh
				}
				if strings.ContainsAny(h, "*?{}") {
					t.note(pn, "route %s: host pattern %q is not translated (sluice matches exact host names)", id, h)
					continue
				}
				out = append(out, h)
			}
			if len(out) > 0 {
				hosts = out
			}
		case "header":
			name, _, _ := c.arg(0, "header", "name")
			re, _, hasRE := c.arg(1, "regexp", "regex")
			switch {
			case name == "":
				t.note(pn, "route %s: Header predicate without a header name", id)
			case hasRE && re != "" && regexp.QuoteMeta(re) == re:
				r.headers = append(r.headers, [2]string{name, re})
			default:
				t.note(pn, "route %s: Header predicate %s matching %q is not translated (sluice matches exact header values only)", id, name, re)
			}
		case "query":
			param, _, _ := c.arg(0, "param")
			re, _, _ := c.arg(1, "regexp", "regex")
			switch {
			case param == "":
				t.note(pn, "route %s: Query predicate without a parameter name", id)
			case re == "" || regexp.QuoteMeta(re) == re:
				r.query = append(r.query, [2]string{param, re})
			default:
				t.note(pn, "route %s: Query predicate %s matching %q is not translated (sluice matches exact query values, or presence)", id, param, re)
			}
		default:
			t.note(pn, "route %s: predicate %s is not translated", id, c.name)
		}
	}
	r.path = paths[0]
	// Filters: default filters first, then the route's.
	var prefix string
	prefixed := false
	for _, fn := range append(slices.Clone(defaults), n.get("filters").items()...) {
		c, ok := t.component(fn, "filter")
		if !ok {
			continue
		}
		switch strings.ToLower(c.name) {
		case "stripprefix":
			v, _, _ := c.arg(0, "parts")
			k, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || k < 0 {
				t.note(fn, "route %s: StripPrefix %q is not a number of segments", id, v)
				continue
			}
			if prefixed {
				t.note(fn, "route %s: StripPrefix after PrefixPath or RewritePath is not translated (sluice strips before adding its base path)", id)
				continue
			}
			r.strip += k
		case "prefixpath":
			v, _, _ := c.arg(0, "prefix")
			prefix = strings.TrimSuffix(v, "/") + prefix
			prefixed = true
		case "rewritepath":
			re, _, _ := c.arg(0, "regexp")
			rep, _, _ := c.arg(1, "replacement")
			k, base, ok := rewriteAsStrip(re, rep)
			if !ok || prefixed || prefix != "" {
				t.note(fn, "route %s: RewritePath %q → %q is not translated (sluice can strip leading segments and add a base path)", id, re, rep)
				continue
			}
			if !strings.Contains(re, "/?(") {
				t.info(fn, "route %s: RewritePath %q leaves the bare prefix path unrewritten; sluice strips it all the same", id, re)
			}
			r.strip += k
			prefix = base
			prefixed = base != ""
		case "requestratelimiter":
			if l, ok := t.rateLimit(id, c); ok {
				l.scgRoute, l.noID, l.node = scgID, scgID == "", fn
				if l.noID {
					l.scgRoute = id
				}
				r.limits = append(r.limits, l)
			}
		default:
			t.note(fn, "route %s: filter %s is not translated", id, c.name)
		}
	}
	if drop {
		return
	}
	if prefix != "" {
		r.upstream += prefix
	}
	// One sluice route per path and host.
	k := 0
	for _, p := range paths {
		for _, h := range hosts {
			rr := r
			rr.path, rr.host = p, h
			if k > 0 {
				rr.id = t.unique(fmt.Sprintf("%s-%d", id, k+1))
				rr.comment = fmt.Sprintf("SCG route %s, pattern %d", id, k+1)
			}
			t.ids[rr.id] = true
			t.routes = append(t.routes, rr)
			k++
		}
	}
}

// pathSegRE matches a {name} capture of one segment.
var pathSegRE = regexp.MustCompile(`^\{[A-Za-z_][A-Za-z0-9_]*\}$`)

// sluicePath writes a Spring PathPattern as a sluice path glob.
func sluicePath(p string) (string, bool) {
	p = strings.TrimSpace(p)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	segs := strings.Split(p[1:], "/")
	for i, s := range segs {
		last := i == len(segs)-1
		switch {
		case s == "**" || (strings.HasPrefix(s, "{*") && strings.HasSuffix(s, "}")):
			if !last {
				return "", false
			}
			segs[i] = "**"
		case s == "*" || pathSegRE.MatchString(s):
			segs[i] = "*"
		case s == "" && last:
		case s == "" || strings.ContainsAny(s, "*?{}\\;"):
			return "", false
		case s == "." || s == "..":
			return "", false
		}
	}
	out := "/" + strings.Join(segs, "/")
	if strings.HasSuffix(out, "/") && out != "/" {
		out = strings.TrimSuffix(out, "/")
	}
	return out, true
}

// rewriteRE matches the RewritePath regexps that strip a literal prefix:
// /a/b/?(?<rest>.*) or /a/b/(?<rest>.*), optionally anchored.
var rewriteRE = regexp.MustCompile(`^\^?((?:/[A-Za-z0-9._~-]+)+)/\??\(\?<([A-Za-z][A-Za-z0-9]*)>\.\*\)\$?$`)

// rewriteAsStrip reads a RewritePath that strips a literal prefix and puts
// an optional literal one in front: it returns the segments stripped and
// the new prefix.
func rewriteAsStrip(re, rep string) (int, string, bool) {
	m := rewriteRE.FindStringSubmatch(strings.TrimSpace(re))
	if m == nil {
		return 0, "", false
	}
	rep = strings.TrimSpace(rep)
	for _, ref := range []string{"${" + m[2] + "}", "$\\{" + m[2] + "}"} {
		if base, ok := strings.CutSuffix(rep, "/"+ref); ok {
			if base != "" && !regexp.MustCompile(`^(?:/[A-Za-z0-9._~-]+)+$`).MatchString(base) {
				return 0, "", false
			}
			return strings.Count(m[1], "/"), base, true
		}
	}
	return 0, "", false
}

// spelBeanRE matches a SpEL reference to a bean, #{@name}.
var spelBeanRE = regexp.MustCompile(`^#\{\s*@([A-Za-z_$][A-Za-z0-9_$]*)\s*\}$`)

// rateLimit translates a RequestRateLimiter filter.
func (t *translator) rateLimit(id string, c component) (limit, bool) {
	fn := c.n
	known := map[string]bool{"keyresolver": true, "ratelimiter": true, "redisratelimiter.replenishrate": true,
		"redisratelimiter.burstcapacity": true, "redisratelimiter.requestedtokens": true, "denyemptykey": true,
		"emptykeystatus": true, "emptykeystatuscode": true, "statuscode": true}
	for k, n := range c.named {
		if !known[k] {
			t.note(n, "route %s: RequestRateLimiter argument %q is not translated", id, k)
		}
	}
	if len(c.pos) > 0 {
		t.note(fn, "route %s: RequestRateLimiter takes no shortcut arguments; they are not translated", id)
	}
	if v, n, ok := c.arg(-1, "ratelimiter"); ok {
		t.note(n, "route %s: custom rate limiter %s: its code is not translated; the limit follows RedisRateLimiter's arguments", id, v)
	}
	if v, n, ok := c.arg(-1, "statuscode"); ok && v != "429" && !strings.EqualFold(v, "TOO_MANY_REQUESTS") {
		t.note(n, "route %s: status-code %s is not translated: sluice denies with 429", id, v)
	}
	num := func(name, cfg string, def int64) (int64, bool) {
		v, n, ok := c.arg(-1, name)
		if !ok {
			// spring.cloud.gateway.redis-rate-limiter.config.<route>.<field>
			if cn := t.routeConfig(id, cfg); cn != nil {
				v, _ = cn.text()
				n, ok = cn, true
			}
		}
		if !ok {
			return def, def >= 0
		}
		x, err := strconv.ParseInt(strings.TrimSpace(t.value(v)), 10, 64)
		if err != nil {
			t.note(n, "route %s: %s %q is not a whole number", id, name, v)
			return 0, false
		}
		return x, true
	}
	rate, okR := num("redisratelimiter.replenishrate", "replenishrate", -1)
	burst, okB := num("redisratelimiter.burstcapacity", "burstcapacity", -1)
	cost, okC := num("redisratelimiter.requestedtokens", "requestedtokens", 1)
	switch {
	case !okR || !okB || !okC:
		t.note(fn, "route %s: RequestRateLimiter without redis-rate-limiter.replenishRate and burstCapacity is not translated", id)
		return limit{}, false
	case burst < 1:
		t.note(fn, "route %s: burstCapacity %d blocks every request; the limit is not translated", id, burst)
		return limit{}, false
	case rate < 1:
		t.note(fn, "route %s: replenishRate %d is not positive; the limit is not translated", id, rate)
		return limit{}, false
	case cost < 1 || cost > burst:
		t.note(fn, "route %s: requestedTokens %d outside 1..burstCapacity %d (SCG then denies every request); the limit is not translated", id, cost, burst)
		return limit{}, false
	}
	if 2*burst < rate {
		t.info(fn, "route %s: burstCapacity %d < replenishRate/2: SCG keeps no state at all (its TTL is 0 s); compat scg keeps it for 1 s", id, burst)
	}
	l := limit{cost: cost, onEmpty: "deny", headers: true}
	// The key.
	bean := "principalNameKeyResolver" // SCG's default resolver
	kn := fn
	if v, n, ok := c.arg(-1, "keyresolver"); ok {
		kn = n
		m := spelBeanRE.FindStringSubmatch(strings.TrimSpace(v))
		if m == nil {
			t.note(n, "route %s: key-resolver %q is not a bean reference #{@name}; the limit is not translated", id, v)
			return limit{}, false
		}
		bean = m[1]
	}
	key, ok := t.resolver(id, bean, kn)
	if !ok {
		return limit{}, false
	}
	l.key = key
	// Empty keys.
	deny := true
	denyNode := pick(t.getBoth("filter.requestratelimiter.denyemptykey"))
	if v, n, ok := c.arg(-1, "denyemptykey"); ok {
		denyNode = n
		deny = v != "false"
	} else if denyNode != nil {
		v, _ := denyNode.text()
		deny = v != "false"
	}
	if !deny {
		l.onEmpty = "skip"
	}
	status := ""
	var statusNode *node
	if v, n, ok := c.arg(-1, "emptykeystatus", "emptykeystatuscode"); ok {
		status, statusNode = v, n
	} else if n := t.getBoth("filter.requestratelimiter.emptykeystatuscode"); n != nil {
		status, _ = n.text()
		statusNode = n
	}
	if deny && status != "" && status != "403" && !strings.EqualFold(status, "FORBIDDEN") {
		t.note(statusNode, "route %s: empty-key-status-code %s is not translated: sluice answers 403 to an empty key", id, status)
	}
	if n := t.getBoth("redisratelimiter.includeheaders"); n != nil {
		if v, _ := n.text(); v == "false" {
			l.headers = false
		}
	}
	l.policy = t.policyFor(burst, rate)
	l.comment = fmt.Sprintf("SCG: replenishRate %d, burstCapacity %d, requestedTokens %d, key-resolver #{@%s}", rate, burst, cost, bean)
	return l, true
}

// routeConfig returns spring.cloud.gateway.redis-rate-limiter.config.<id>.<field>.
func (t *translator) routeConfig(id, field string) *node {
	cfg := t.getBoth("redisratelimiter.config")
	if cfg == nil || cfg.m == nil {
		return nil
	}
	for _, k := range cfg.keys {
		if k == canon(id) {
			return cfg.m[k].get(field)
		}
	}
	return nil
}

// resolver maps a key resolver bean to a sluice key: --key-resolver first,
// then the common resolvers by name.
func (t *translator) resolver(id, bean string, n *node) (string, bool) {
	if k, ok := t.o.KeyResolvers[bean]; ok {
		return k, true
	}
	low := strings.ToLower(bean)
	switch {
	case strings.Contains(low, "remoteaddr") || strings.Contains(low, "hostaddr") || strings.Contains(low, "ipaddr") ||
		strings.HasPrefix(low, "ipkey") || strings.HasPrefix(low, "clientip") || strings.Contains(low, "remoteip"):
		t.info(n, "route %s: key resolver %s read as the client address (ip); map it with --key-resolver %s=KEY otherwise", id, bean, bean)
		return "ip", true
	case strings.HasPrefix(low, "path") || strings.HasPrefix(low, "uri"):
		t.info(n, "route %s: key resolver %s read as the request path (path); map it with --key-resolver %s=KEY otherwise", id, bean, bean)
		return "path", true
	}
	if strings.Contains(low, "principal") {
		t.note(n, "route %s: key resolver %s (the authenticated principal's name) has no sluice counterpart; map it to where the user name travels with --key-resolver %s=header:NAME; the limit is not translated", id, bean, bean)
		return "", false
	}
	t.note(n, "route %s: key resolver bean %s is Java code; map it with --key-resolver %s=KEY (header:NAME, query:NAME, ip, path, ...); the limit is not translated", id, bean, bean)
	return "", false
}

// policyFor returns the policy name for a bucket, adding it once.
func (t *translator) policyFor(burst, rate int64) string {
	name := fmt.Sprintf("scg-r%d-b%d", rate, burst)
	for _, p := range t.policies {
		if p.name == name {
			return name
		}
	}
	t.policies = append(t.policies, policy{name: name, burst: burst, rate: rate})
	return name
}

// ParseKeyResolver parses one --key-resolver value, BEAN=KEY, checking KEY
// as a single-part sluice key.
func ParseKeyResolver(s string) (bean, key string, err error) {
	bean, key, ok := strings.Cut(s, "=")
	bean, key = strings.TrimSpace(bean), strings.TrimSpace(key)
	if !ok || bean == "" || key == "" {
		return "", "", fmt.Errorf("--key-resolver %q: want BEAN=KEY, such as userKeyResolver=header:X-User-Id", s)
	}
	if _, err := httplimit.ParseKey(key); err != nil {
		return "", "", fmt.Errorf("--key-resolver %q: %v", s, err)
	}
	return bean, key, nil
}
