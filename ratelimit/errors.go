package ratelimit

import "errors"

var (
	errShortOut  = errors.New("ratelimit: out is shorter than reqs")
	errNilPolicy = errors.New("ratelimit: request with nil policy")
)
