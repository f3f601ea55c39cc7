package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sluice-gw/sluice/gateway/config/scgimport"
)

// exitPartial is import's exit status when it wrote a configuration but
// left parts of the input out (each listed on stderr).
const exitPartial = 3

const importUsage = `usage: sluice import scg [flags] FILE...

Translates Spring Cloud Gateway's configuration (Spring Boot application.yml,
.yaml or .properties files, later files overriding earlier ones) into a sluice
configuration on stdout. Every part it cannot translate is listed on stderr as
FILE:LINE: message (docs/migrating-from-scg.md). Every FILE is read, whatever
its name, except a profile file (application-P.yml) of a profile P that is not
active.

  --profile P              an active Spring profile (repeatable, or comma-separated;
                           default: the files' spring.profiles.active)
  --config-name NAME       Spring Boot's spring.config.name (repeatable, or
                           comma-separated; default application): NAME-P.yml
                           is the file of profile P
  --key-resolver BEAN=KEY  the sluice key of a key resolver bean, such as
                           userKeyResolver=header:X-User-Id (repeatable)
  --scg-version V          the SCG instances' version, such as 4.1.9 or 4.2.0 (or
                           the Spring Cloud release train, 2023.0 or 2024.0): from
                           4.2.0 on SCG's keys name the route (compat: scg with
                           scg_route_id), before they do not (compat: scg-4.1);
                           default: 4.2.0 or later, said in a note
  --native                 sluice's own token buckets instead of compat: scg
                           (budgets then no longer shared with SCG instances)

Exit status: 0 complete, 3 written but partial (see stderr), 1 a file could not
be read, 2 usage error.
`

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// splitFlag returns the comma-separated values of a repeatable flag.
func splitFlag(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, q := range strings.Split(v, ",") {
			if q = strings.TrimSpace(q); q != "" {
				out = append(out, q)
			}
		}
	}
	return out
}

// runImport runs `sluice import scg`.
func runImport(args []string, env Env) int {
	if len(args) == 0 || args[0] != "scg" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fmt.Fprint(env.Stdout, importUsage)
			return exitOK
		}
		fmt.Fprintf(env.Stderr, "sluice import: the one source is scg\n%s", importUsage)
		return exitUsage
	}
	args = args[1:]
	fs := flag.NewFlagSet("sluice import scg", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var profiles, resolvers, names stringList
	var native bool
	var version string
	fs.StringVar(&version, "scg-version", "", "")
	fs.Var(&profiles, "profile", "")
	fs.Var(&names, "config-name", "")
	fs.Var(&resolvers, "key-resolver", "")
	fs.BoolVar(&native, "native", false, "")
	// Flags may come before, between or after the files.
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(env.Stdout, importUsage)
				return exitOK
			}
			fmt.Fprintf(env.Stderr, "sluice import scg: %v\n%s", err, importUsage)
			return exitUsage
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) == 0 {
		fmt.Fprintf(env.Stderr, "sluice import scg: no FILE given\n%s", importUsage)
		return exitUsage
	}
	if _, err := scgimport.ParseSCGVersion(version); err != nil {
		fmt.Fprintf(env.Stderr, "sluice import scg: %v\n", err)
		return exitUsage
	}
	o := scgimport.Options{Native: native, SCGVersion: version, KeyResolvers: map[string]string{}}
	o.Profiles = splitFlag(profiles)
	o.ConfigNames = splitFlag(names)
	for _, r := range resolvers {
		bean, key, err := scgimport.ParseKeyResolver(r)
		if err != nil {
			fmt.Fprintf(env.Stderr, "sluice import scg: %v\n", err)
			return exitUsage
		}
		o.KeyResolvers[bean] = key
	}
	in := make([]scgimport.File, len(files))
	for i, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			fmt.Fprintf(env.Stderr, "sluice import scg: %v\n", err)
			return exitError
		}
		in[i] = scgimport.File{Name: name, Data: data}
	}
	res, err := scgimport.Translate(in, o)
	if err != nil {
		fmt.Fprintf(env.Stderr, "sluice import scg: %v\n", err)
		return exitError
	}
	fmt.Fprint(env.Stdout, res.Config)
	for _, n := range res.Notes {
		fmt.Fprintln(env.Stderr, n)
	}
	if !res.Complete() {
		return exitPartial
	}
	return exitOK
}
