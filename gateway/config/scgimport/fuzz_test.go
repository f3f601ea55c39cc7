package scgimport

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzTranslate: no input makes the translation panic; a YAML or
// .properties file that reads gives a configuration.
func FuzzTranslate(f *testing.F) {
	files, _ := filepath.Glob("../../internal/cli/testdata/importscg/*/application*")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(filepath.Ext(name) == ".properties", data)
	}
	f.Add(false, []byte("spring: {cloud: {gateway: {routes: 5}}}"))
	f.Add(false, []byte("spring.cloud.gateway.routes: [{id: x, uri: {a: b}, predicates: {p: q}, filters: [{args: 1}]}]"))
	f.Add(true, []byte("spring.cloud.gateway.routes[0].filters[0].args=x\nspring.cloud.gateway.routes[0]=y\n"))
	f.Fuzz(func(t *testing.T, props bool, data []byte) {
		name := "application.yml"
		if props {
			name = "application.properties"
		}
		res, err := Translate([]File{{Name: name, Data: data}}, Options{KeyResolvers: map[string]string{"userKeyResolver": "header:X-User-Id"}})
		if err == nil && res.Config == "" {
			t.Fatal("no configuration and no error")
		}
	})
}
