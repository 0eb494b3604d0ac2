package spec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

// ParseSize parses a byte size such as "2GiB", "512 MiB", "1.5GB", "4096"
// or "0". Units are case-insensitive; KiB..TiB are powers of 1024 and KB..TB
// powers of 1000. The result must be a whole number of bytes below 2^62.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	if num == "" {
		return 0, fmt.Errorf("size %q does not start with a number", s)
	}
	mult, ok := sizeUnits[unit]
	if !ok {
		return 0, fmt.Errorf("size %q has unknown unit %q", s, t[i:])
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %q is not a number", s, num)
	}
	bytes := f * mult
	if bytes >= 1<<62 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	if bytes != math.Trunc(bytes) {
		return 0, fmt.Errorf("size %q is not a whole number of bytes", s)
	}
	return int64(bytes), nil
}

// FormatSize writes a byte count with a binary unit, e.g. "1.50 GiB".
func FormatSize(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), -1
	for math.Abs(f) >= unit && i < 3 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.2f %s", f, []string{"KiB", "MiB", "GiB", "TiB"}[i])
}
