// Package logs sets up the process logger: a journal-style text handler (tint)
// for people, or JSON for collectors.
package logs

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/lmittmann/tint"
)

// New returns a logger writing format ("journal" or "json") at level.
func New(w io.Writer, format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("logs: level %q: %w", level, err)
	}
	var h slog.Handler
	switch strings.ToLower(format) {
	case "journal", "text", "":
		h = tint.NewTextHandler(w, &tint.Options{Level: lvl, TimeFormat: time.TimeOnly + ".000", NoColor: !isTerminal(w)})
	case "json":
		h = slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})
	default:
		return nil, fmt.Errorf("logs: unknown format %q (journal, json)", format)
	}
	return slog.New(h), nil
}

func isTerminal(w io.Writer) bool {
	type fd interface{ Fd() uintptr }
	f, ok := w.(fd)
	return ok && isatty(f.Fd())
}

// Flags registers --log-format and --log-level on fs and returns the constructor
// of the logger they describe (call it after parsing).
func Flags(fs *flag.FlagSet) func() (*slog.Logger, error) {
	format := fs.String("log-format", "journal", "journal or json")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	return func() (*slog.Logger, error) { return New(os.Stderr, *format, *level) }
}
