module github.com/sluice-gw/sluice

go 1.25.0

require (
	github.com/redis/rueidis v1.0.77
	github.com/sony/gobreaker/v2 v2.4.0
	pgregory.net/rapid v1.1.0
)

require golang.org/x/sys v0.47.0 // indirect
