//go:build !linux

package main

import (
	"errors"
	"log/slog"
)

func syncRoutes(*slog.Logger, []Route, []Route) ([]Route, error) {
	return nil, errors.New("kindnet: routes need Linux")
}
