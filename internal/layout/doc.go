// Package layout holds no code: its test checks that the packages of sluice
// import only what docs/layout.md's table allows, and that every Go file is
// gofmt-clean.
package layout
