//go:build !linux

package logs

func isatty(uintptr) bool { return false }
