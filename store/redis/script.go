package redis

import (
	"embed"
	"strings"

	"github.com/redis/rueidis"
)

// The scripts are assembled once from the embedded files: the shared
// prelude, one file per algorithm (each mirroring its Go step function),
// then the entry point.
//
//go:embed lua/*.lua
var luaFiles embed.FS

// algorithmFiles lists the algorithm files in the order they are joined.
var algorithmFiles = []string{
	"token_bucket.lua", "leaky_bucket.lua", "fixed_window.lua",
	"sliding_log.lua", "sliding_window.lua", "gcra.lua",
}

// assemble joins the prelude, every algorithm file and main.
func assemble(main string) string {
	var b strings.Builder
	for _, name := range append(append([]string{"prelude.lua"}, algorithmFiles...), main) {
		src, err := luaFiles.ReadFile("lua/" + name)
		if err != nil {
			panic("redis store: embedded script missing: " + name)
		}
		b.Write(src)
		b.WriteByte('\n')
	}
	return b.String()
}

var (
	// evalSource decides (and commits) every limit of one request.
	evalSource = assemble("main.lua")
	// refundSource undoes a commit (Cluster, limits in several slots).
	refundSource = assemble("refund.lua")

	// The rueidis scripts send EVALSHA and, only on NOSCRIPT (the script was
	// never run), EVAL. They are not marked retryable, and the client is
	// built with DisableRetry, so a script that timed out is never re-sent.
	evalScript   = rueidis.NewLuaScript(evalSource)
	refundScript = rueidis.NewLuaScript(refundSource)
)

// Script modes (ARGV[1] of main.lua).
const (
	modeEvaluate = "e" // decide and commit
	modeViews    = "v" // decide and commit, also report unchanged views
	modePeek     = "p" // decide only
)

// Reply layout of main.lua: two header integers, then fields per limit.
const (
	replyHeader   = 2
	replyPerLimit = 9
)
