package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// parseInto parses raw into the field p points to, by the field's type. It
// returns "" or the problem, worded like every validation message: what is
// wrong, then "; use" what is allowed. raw is quoted in the message only
// for types that never hold a secret.
func parseInto(p any, raw string) string {
	s := strings.TrimSpace(raw)
	switch f := p.(type) {
	case *string:
		*f = raw
	case *[]string:
		*f = splitList(raw)
	case *bool:
		v, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Sprintf("%q is not a boolean; use true or false", raw)
		}
		*f = v
	case *int:
		v, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Sprintf("%q is not a whole number; use digits only, such as 50", raw)
		}
		*f = v
	case *int64:
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Sprintf("%q is not a whole number; use digits only, such as 512", raw)
		}
		*f = v
	case *float64:
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Sprintf("%q is not a number; use a decimal number such as 1 or 0.5", raw)
		}
		*f = v
	case *time.Duration:
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Sprintf("%q is not a duration; use a number with a unit, such as 90s, 5m or 1h30m", raw)
		}
		*f = v
	case *Bytes:
		v, err := parseBytes(s)
		if err != nil {
			return fmt.Sprintf("%q is not a size; use a byte count or a number with k, m or g, such as 512m or 1g", raw)
		}
		*f = v
	default:
		panic(fmt.Sprintf("config: no parser for %T", p))
	}
	return ""
}

// splitList reads a comma-separated list; blanks around items and empty
// items are dropped.
func splitList(raw string) []string {
	var out []string
	for _, item := range strings.Split(raw, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// parseBytes reads sizes like 512m, 1g, 1.5G or a plain byte count.
func parseBytes(s string) (Bytes, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	mult := float64(1)
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1<<10, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "m"):
		mult, s = 1<<20, strings.TrimSuffix(s, "m")
	case strings.HasSuffix(s, "g"):
		mult, s = 1<<30, strings.TrimSuffix(s, "g")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	return Bytes(v * mult), nil
}

// durationText writes d the way a person writes it in the environment:
// 2m rather than 2m0s.
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
