package precision

import (
	"errors"
	"testing"
)

// FuzzConfigFile: any bytes are read as a config file or refused with an
// ErrInvalid error, never a panic.
func FuzzConfigFile(f *testing.F) {
	for _, s := range []string{
		"mixed_precision: fp8\nfp8_config:\n  backend: TE\n  margin: 1\n",
		"fp8_config:\n  override_linear_precision: [false, false, true]\n",
		"distributed_type: 'NO'\nnum_processes: 2\n",
		"fp8_config: ~\n", "", "- 1\n", "a: [\n", "&a x: *a\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		vals, _, err := parseConfig(b, "f.yaml")
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		for k, v := range vals {
			if settingByKey(k) == nil || v.src.Kind != FromFile {
				t.Fatalf("value %q %+v", k, v)
			}
		}
	})
}
