package precision

import "strings"

// EnvPrefix starts the names of Octet's own precision variables
// (OCTET_FP8_MARGIN, …); Accelerate's are ACCELERATE_*.
const EnvPrefix = "OCTET_FP8_"

// SwitchWords says which words ParseSwitch takes.
const SwitchWords = "true or false (1/0, yes/no, on/off, y/n, t/f)"

// ParseSwitch reads an on/off setting as every reader of Octet's
// settings (environment variables, flags, config files) does: 1, true,
// yes, on, y, t for true; 0, false, no, off, n, f and the empty string for
// false; any case, surrounding spaces ignored.
func ParseSwitch(s string) (value, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true", "yes", "on", "y", "t":
		return true, true
	case "0", "false", "no", "off", "n", "f", "":
		return false, true
	}
	return false, false
}
