package config

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
)

// loadEnvoyFiles reads the envoyproxy/ratelimit files that r.EnvoyConfig
// names, relative to dir, into r. Every problem is reported: files that
// cannot be read name the envoy_config entry of configFile, problems in a
// file name that file, line and column.
func (r *RLS) loadEnvoyFiles(configFile, dir string) error {
	var errs Errors
	seen := map[string]string{}
	for i, d := range r.Domains {
		seen[d.Domain] = fmt.Sprintf("%s: rls.domains[%d]", configFile, i)
	}
	for i, entry := range r.EnvoyConfig {
		at := fmt.Sprintf("rls.envoy_config[%d]", i)
		files, err := envoyFiles(resolve(dir, entry))
		if err != nil {
			errs = append(errs, &Error{File: configFile, Path: at, Message: err.Error()})
			continue
		}
		for _, f := range files {
			d, ferrs := readEnvoyFile(f)
			errs = append(errs, ferrs...)
			if d == nil {
				continue
			}
			if prev, dup := seen[d.Domain]; dup {
				errs = append(errs, &Error{File: f, Line: 1, Col: 1, Path: "domain",
					Message: fmt.Sprintf("duplicate domain %q (already defined in %s)", d.Domain, prev)})
				continue
			}
			seen[d.Domain] = f
			r.envoy = append(r.envoy, *d)
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// resolve returns p relative to dir unless it is absolute.
func resolve(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// envoyFiles returns p if it is a file, or the *.yaml and *.yml files of
// directory p, sorted.
func envoyFiles(p string) ([]string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return []string{p}, nil
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml") {
			out = append(out, filepath.Join(p, e.Name()))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("directory %s holds no .yaml or .yml file", p)
	}
	slices.Sort(out)
	return out, nil
}

// readEnvoyFile reads and checks one envoyproxy/ratelimit file, strictly,
// without ${NAME} expansion (that service has none).
func readEnvoyFile(path string) (*RLSDomain, Errors) {
	f, err := os.Open(path)
	if err != nil {
		return nil, Errors{{File: path, Message: err.Error()}}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, Errors{{File: path, Message: err.Error()}}
	}
	if len(data) > MaxFileSize {
		return nil, Errors{{File: path, Line: 1, Col: 1, Message: fmt.Sprintf("file is larger than %d bytes", MaxFileSize)}}
	}
	d := newDecoder(path, nil, len(data))
	d.verbatim = true
	body, ok := d.parse(data)
	if !ok {
		return nil, d.errs.sorted()
	}
	dom := &RLSDomain{File: path}
	d.decode(body, "", reflect.ValueOf(dom).Elem(), "")
	v := &validator{file: path, pos: d.pos, parent: d.parent, bad: d.bad, blank: d.blank}
	if strings.TrimSpace(dom.Domain) == "" {
		v.errf("domain", "config file cannot have an empty domain")
	}
	v.rlsDescriptors("", dom.Descriptors, nil, false)
	if errs := append(d.errs, v.errs...); len(errs) > 0 {
		return nil, errs.sorted()
	}
	return dom, nil
}
