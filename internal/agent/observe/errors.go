package observe

import "errors"

// ErrTooMany marks prefixes dropped because the digest would exceed its bound.
var ErrTooMany = errors.New("observe: more prefixes than a digest may hold")
