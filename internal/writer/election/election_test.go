package election

import (
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	base := Config{Namespace: "ns", Name: "l", Identity: "me", LeaseDuration: 60 * time.Second, RenewDeadline: 40 * time.Second, RetryPeriod: 5 * time.Second}
	if err := base.Validate(); err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"renew deadline not below lease duration", func(c *Config) { c.RenewDeadline = c.LeaseDuration }},
		{"retry period not below renew deadline", func(c *Config) { c.RetryPeriod = c.RenewDeadline }},
		{"zero retry period", func(c *Config) { c.RetryPeriod = 0 }},
		{"no identity", func(c *Config) { c.Identity = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			tt.edit(&c)
			if err := c.Validate(); err == nil {
				t.Error("accepted")
			}
		})
	}
}
