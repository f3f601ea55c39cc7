package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
)

// MaxFileSize is the largest configuration file Load reads: 4 MiB.
const MaxFileSize = 4 << 20

// Load reads the configuration file at path and returns it parsed,
// validated and with defaults applied; see [Parse]. A file that cannot be
// read gives that error, wrapped (errors.Is(err, fs.ErrNotExist) works);
// every problem with the file's content is reported as [Errors]. Load also
// reads the envoyproxy/ratelimit files that rls.envoy_config names
// (relative to path's directory), which Parse does not.
func Load(path string, lookup func(string) (string, bool)) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("config: read %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, Errors{{File: path, Line: 1, Col: 1, Message: fmt.Sprintf("file is larger than %d bytes", MaxFileSize)}}
	}
	c, err := Parse(path, data, lookup)
	if err != nil {
		return nil, err
	}
	if c.RLS != nil && len(c.RLS.EnvoyConfig) > 0 {
		if err := c.RLS.loadEnvoyFiles(path, filepath.Dir(path)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Parse parses data, the content of the configuration file filename (used
// in messages, and as the directory that the relative paths of server.tls
// and of routes' upstream_tls are resolved against), validates it, applies
// defaults ([ApplyDefaults]) and compiles its policies. On success the Config is ready for a gateway.
//
// The YAML is decoded strictly: unknown fields and values of the wrong type
// are errors. Anchors, aliases and merge keys ("<<: *base") work. Before a
// string value is used, ${NAME} and ${NAME:-default} in it are replaced
// through lookup (os.LookupEnv in production; nil means no variable is
// set): the default applies when NAME is unset or empty, and $$ stands for
// a literal $. Expansion happens after parsing, so a value can never change
// the YAML structure, and it applies to values, including numbers and
// booleans written as "${PORT:-8080}", and to the keys of overrides,
// headers and plans, but not to field names. In a flow mapping ({...}) quote
// such a value, since '{' and '}' are flow indicators.
//
// Every problem is reported, not just the first, as [Errors] sorted by
// position, each naming the line and column of the offending value.
func Parse(filename string, data []byte, lookup func(string) (string, bool)) (*Config, error) {
	data = bytes.TrimPrefix(data, []byte("\ufeff")) // a UTF-8 byte order mark
	d := newDecoder(filename, lookup, len(data))
	body, ok := d.parse(data)
	if !ok {
		return nil, d.errs.sorted()
	}
	c := &Config{}
	d.decode(body, "", reflect.ValueOf(c).Elem(), "")
	c.policyOrder = d.order["policies"]
	if c.Server.TLS != nil {
		c.Server.TLS.resolvePaths(filepath.Dir(filename))
	}
	resolveUpstreamTLS(c, filepath.Dir(filename))

	v := &validator{file: filename, pos: d.pos, parent: d.parent, bad: d.bad, blank: d.blank}
	v.explicitZeros(c)
	ApplyDefaults(c)
	compiled := v.validate(c)

	if errs := append(d.errs, v.errs...); len(errs) > 0 {
		return nil, errs.sorted()
	}
	c.compiled = compiled
	v.headShadows(c)
	c.warnings = v.warns.sorted()
	return c, nil
}
