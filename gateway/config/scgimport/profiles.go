package scgimport

import (
	"path/filepath"
	"regexp"
	"strings"
)

// profileExtRE matches the extensions of Spring Boot configuration files.
var profileExtRE = regexp.MustCompile(`\.(?i:ya?ml|properties)$`)

// fileProfile returns the profile of a profile-specific file name,
// <name>-<profile>.<ext> for one of the configuration names (Spring Boot's
// spring.config.name, "application" by default), or "" for any other name:
// gateway-config.yml or my-gateway.yml are files of no profile. When two
// names fit (app and app-x for app-x-dev.yml), the longer one wins.
func fileProfile(file string, names []string) string {
	base := filepath.Base(file)
	loc := profileExtRE.FindStringIndex(base)
	if loc == nil {
		return ""
	}
	stem, profile := base[:loc[0]], ""
	best := -1
	for _, n := range names {
		if p, ok := strings.CutPrefix(stem, n+"-"); ok && p != "" && len(n) > best {
			profile, best = p, len(n)
		}
	}
	return profile
}

// matchProfiles evaluates a Spring profile expression list (comma
// separated: any may hold) against the active profiles. Each expression
// may use !, &, | and parentheses. ok is false for an expression it cannot
// read.
func matchProfiles(expr string, active []string) (match, ok bool) {
	for _, e := range strings.Split(expr, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		p := &profileParser{s: e, active: active}
		v := p.or()
		p.skip()
		if p.bad || p.i != len(p.s) {
			return false, false
		}
		if v {
			match = true
		}
	}
	return match, true
}

type profileParser struct {
	s      string
	i      int
	active []string
	bad    bool
}

func (p *profileParser) skip() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *profileParser) or() bool {
	v := p.and()
	for p.skip(); p.i < len(p.s) && p.s[p.i] == '|'; p.skip() {
		p.i++
		w := p.and()
		v = v || w
	}
	return v
}

func (p *profileParser) and() bool {
	v := p.unary()
	for p.skip(); p.i < len(p.s) && p.s[p.i] == '&'; p.skip() {
		p.i++
		w := p.unary()
		v = v && w
	}
	return v
}

func (p *profileParser) unary() bool {
	p.skip()
	if p.i >= len(p.s) {
		p.bad = true
		return false
	}
	switch p.s[p.i] {
	case '!':
		p.i++
		return !p.unary()
	case '(':
		p.i++
		v := p.or()
		p.skip()
		if p.i >= len(p.s) || p.s[p.i] != ')' {
			p.bad = true
			return false
		}
		p.i++
		return v
	}
	start := p.i
	for p.i < len(p.s) && !strings.ContainsRune(" !&|()", rune(p.s[p.i])) {
		p.i++
	}
	name := p.s[start:p.i]
	if name == "" {
		p.bad = true
		return false
	}
	for _, a := range p.active {
		if a == name {
			return true
		}
	}
	return false
}
