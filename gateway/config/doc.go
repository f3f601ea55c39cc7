// Package config loads, checks and describes sluice's YAML configuration
// (README.md, "Configuration reference").
//
// [Load] and [Parse] turn a file into a [Config] in four steps:
//
//  1. parse the YAML with goccy/go-yaml's parser into a syntax tree;
//  2. decode the tree into the Config structs strictly, expanding
//     ${NAME} and ${NAME:-default} in values and recording where each value
//     sits;
//  3. apply defaults in one place, [ApplyDefaults];
//  4. validate every rule and compile the policies with
//     [ratelimit.NewPolicy].
//
// Every problem found on the way is reported, not just the first, as
// [Errors]: each [Error] names the file, line and column of the offending
// value, its path such as routes[0].limits[1].policy, and a message that
// quotes what was given and states what is allowed. `sluice check` prints
// them one per line:
//
//	sluice.yaml:14:17: routes[0].limits[1].policy: unknown policy "per_user" (defined: per-user, hourly)
//
// A valid Config can describe itself: [Config.Effective] renders it, with
// defaults applied and secrets redacted, as YAML, and [Config.Summary] gives
// check's one-line verdict.
//
// The field comments of [Config] and the types it contains are the
// reference manual of the configuration file.
package config
