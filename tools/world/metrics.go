package world

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
)

// MetricSample finds one sample ("name" or "name{labels}") in a Prometheus
// text exposition, as the agents and writers serve it.
func MetricSample(body []byte, sample string) (float64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}
