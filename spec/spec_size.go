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

// sizeUnitList is what an unknown unit's message offers instead.
const sizeUnitList = "B, KB, MB, GB, TB, KiB, MiB, GiB or TiB"

// ParseSize parses a byte size such as "2GiB", "512 MiB", "1.5GB", "4096"
// or "0". Units are case-insensitive; KiB..TiB are powers of 1024 and KB..TB
// powers of 1000. The result must be a whole number of bytes below 2^62.
// Each error names the size as written and says what is wrong with it in
// words: negative, a sign, an exponent, an unknown unit (listing the
// known ones), not a whole number of bytes, too large.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("size %q is empty", s)
	}
	switch t[0] {
	case '-':
		return 0, fmt.Errorf("size %q must not be negative", s)
	case '+':
		return 0, fmt.Errorf("size %q starts with a sign (write %q)", s, t[1:])
	}
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, rawUnit := t[:i], strings.TrimSpace(t[i:])
	if num == "" {
		return 0, fmt.Errorf("size %q does not start with a number", s)
	}
	if exp := exponent(rawUnit); exp != "" {
		return 0, exponentError(s, num+exp, rawUnit[len(exp):])
	}
	mult, ok := sizeUnits[strings.ToLower(rawUnit)]
	if !ok {
		return 0, fmt.Errorf("size %q has unknown unit %q (want %s)", s, rawUnit, sizeUnitList)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %q is not a number", s, num)
	}
	bytes := f * mult
	if bytes >= 1<<62 {
		return 0, fmt.Errorf("size %q is too large (want less than 4 EiB)", s)
	}
	if bytes != math.Trunc(bytes) {
		return 0, fmt.Errorf("size %q is not a whole number of bytes", s)
	}
	return int64(bytes), nil
}

// exponent is the "e3" or "E+3" that starts u, or "".
func exponent(u string) string {
	if len(u) < 2 || (u[0] != 'e' && u[0] != 'E') {
		return ""
	}
	i := 1
	if u[i] == '+' || u[i] == '-' {
		i++
	}
	j := i
	for j < len(u) && u[j] >= '0' && u[j] <= '9' {
		j++
	}
	if j == i {
		return ""
	}
	return u[:j]
}

// exponentError refuses "1e3MB", suggesting the number written out when
// it is a whole one ("1000MB").
func exponentError(s, mantExp, unit string) error {
	msg := fmt.Sprintf("size %q is in exponent notation, which sizes do not take", s)
	unit = strings.TrimSpace(unit)
	if f, err := strconv.ParseFloat(mantExp, 64); err == nil && f == math.Trunc(f) && f < 1e15 {
		if _, ok := sizeUnits[strings.ToLower(unit)]; ok {
			return fmt.Errorf("%s (write %q)", msg, strconv.FormatFloat(f, 'f', -1, 64)+unit)
		}
	}
	return fmt.Errorf("%s (write the number out, with a unit: %s)", msg, sizeUnitList)
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
