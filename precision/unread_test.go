package precision

import (
	"flag"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// validValue returns a value s accepts.
func validValue(s setting) string {
	for _, v := range []string{"1", "true", "E4M3", "max", "O1", "tensorwise", "round_up", "high_precision", "te", "2"} {
		if _, ok := s.canon(v); ok {
			return v
		}
	}
	panic("no valid value for " + s.key)
}

// TestUnreadSettingsRefused: under -precision fp32 and bf16 every recipe
// flag is refused, naming it and the precision with its source; every
// FP8 variable of each family and every fp8_config key gives a warning
// naming it (the environment and the file serve a program's FP8 runs);
// under fp8 (and both, all) they are read.
func TestUnreadSettingsRefused(t *testing.T) {
	for _, mode := range []string{"fp32", "bf16"} {
		// Flags.
		for _, s := range settings {
			if s.flag == "" || s.top || s.key == "mixed_precision" {
				continue
			}
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			var p Config
			p.RegisterFlags(fs)
			v := validValue(s)
			require.NoError(t, fs.Parse([]string{"-precision", mode, "-" + s.flag, v}))
			err := p.resolve(env())
			require.ErrorIs(t, err, ErrInvalid, "-%s under %s", s.flag, mode)
			require.ErrorContains(t, err, fmt.Sprintf("-%s %s: an FP8 setting, and this run is %s (from -precision %s)", s.flag, v, DisplayName(map[string]string{"fp32": "fp32", "bf16": "bf16"}[mode]), mode))
			// The same flag with fp8, both or all is read.
			for _, ok := range []string{"fp8", "both", "all"} {
				fs := flag.NewFlagSet("x", flag.ContinueOnError)
				p := Config{Backend: s.backend}
				if strings.Contains(s.backend, " ") || s.backend == "" {
					p.Backend = ""
				} else {
					p.Backend = s.backend
				}
				p.RegisterFlags(fs)
				args := []string{"-precision", ok, "-" + s.flag, v}
				if s.key != "backend" && p.Backend != "" {
					args = append(args, "-recipe", p.Backend)
				}
				require.NoError(t, fs.Parse(args))
				require.NoError(t, p.resolve(env()), "%v", args)
			}
		}
		// Variables of both families (Accelerate's mixed precision aside).
		for _, s := range settings {
			if s.top || s.key == "mixed_precision" {
				continue
			}
			for _, name := range []string{prefixed(s.octet), s.accel} {
				if name == "" {
					continue
				}
				p := Config{MixedPrecision: mode}
				v := validValue(s)
				require.NoError(t, p.resolve(env(name, v)), name)
				require.Equal(t, []string{fmt.Sprintf("%s=%s applies to FP8 runs only: this run is %s (set in Go), which reads none", name, v, DisplayName(p.Name()))}, p.Warnings())
			}
		}
		// Config file keys under fp8_config.
		for _, s := range settings {
			if s.top || len(s.yaml) == 0 {
				continue
			}
			v := validValue(s)
			path := writeConfig(t, fmt.Sprintf("mixed_precision: %s\nfp8_config:\n  %s: %s\n", map[string]string{"fp32": "'no'", "bf16": "bf16"}[mode], s.yaml[0], v))
			p := Config{flags: &flagValues{given: map[string]string{}, config: path}}
			require.NoError(t, p.resolve(env()), s.key)
			require.Contains(t, p.Warnings(), fmt.Sprintf("%s:3: %s %s applies to FP8 runs only", path, s.key, v)+
				fmt.Sprintf(": this run is %s (from %s:1 %s), which reads none", DisplayName(p.Name()), path, map[string]string{"fp32": "no", "bf16": "bf16"}[mode]))
		}
	}
	// The override list too.
	path := writeConfig(t, "mixed_precision: bf16\nfp8_config:\n  override_linear_precision: [false, false, true]\n")
	p := Config{flags: &flagValues{given: map[string]string{}, config: path}}
	require.NoError(t, p.resolve(env()))
	require.Contains(t, p.Warnings(), path+":3: override_fprop false applies to FP8 runs only: this run is bf16 (from "+path+":1 bf16), which reads none")
}

// TestUnknownVariables: a misspelt OCTET_ variable is an error naming
// the nearest known one; a misspelt ACCELERATE_FP8_ variable a warning;
// other ACCELERATE_ variables are none of Octet's business.
func TestUnknownVariables(t *testing.T) {
	for _, c := range []struct {
		kv, want string
		warn     bool
	}{
		{"OCTET_FP8_MARGN=2", "environment variable OCTET_FP8_MARGN is not one Octet reads (did you mean OCTET_FP8_MARGIN?)", false},
		{"OCTET_GEM_KERNEL=go", "(did you mean OCTET_GEMM_KERNEL?)", false},
		{"OCTET_FP8_AMAX_HISTORY=4", "(did you mean OCTET_FP8_AMAX_HISTORY_LEN?)", false},
		{"ACCELERATE_FP8_MARGN=2", "environment variable ACCELERATE_FP8_MARGN is not one Octet reads; it is ignored (did you mean ACCELERATE_FP8_MARGIN?)", true},
	} {
		p := Config{MixedPrecision: "fp8"}
		err := p.resolveEnv(env(), func() []string { return []string{"PATH=/bin", "ACCELERATE_USE_FSDP=true", c.kv} })
		if c.warn {
			require.NoError(t, err)
			require.Equal(t, []string{c.want}, p.Warnings())
			continue
		}
		require.ErrorIs(t, err, ErrInvalid)
		require.ErrorContains(t, err, c.want)
	}
	p := Config{MixedPrecision: "fp8"}
	require.NoError(t, p.resolveEnv(env(), func() []string { return append(OtherEnvVars, EnvVars()...) }))
	require.Empty(t, p.Warnings())
	// Resolve reads the process's environment.
	t.Setenv("OCTET_FP8_INTERVALL", "2")
	require.ErrorContains(t, p.Resolve(), "OCTET_FP8_INTERVALL is not one Octet reads (did you mean OCTET_FP8_INTERVAL?)")
}

// TestEveryOctetVariableIsKnown: every OCTET_ name in the repository's Go
// files is one checkEnviron knows, so that none is refused as unknown.
func TestEveryOctetVariableIsKnown(t *testing.T) {
	out, err := exec.Command("git", "grep", "-h", "-o", "-E", `"OCTET_[A-Z0-9_]+"`, "--", "../*.go").Output()
	if err != nil {
		t.Skipf("git grep: %v", err)
	}
	known := append(append([]string(nil), OtherEnvVars...), EnvVars()...)
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`OCTET_[A-Z0-9_]+`).FindAllString(string(out), -1) {
		if strings.HasSuffix(m, "_") || m == "OCTET_FP8_INTERVALL" || strings.Contains(m, "MARGN") || strings.Contains(m, "GEM_") || m == "OCTET_FP8_AMAX_HISTORY" {
			continue // prefixes, and this test's misspellings
		}
		names[m] = true
	}
	var missing []string
	for n := range names {
		found := false
		for _, k := range known {
			found = found || k == n
		}
		if !found {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "OCTET_ variables read somewhere but unknown to checkEnviron (add them to OtherEnvVars)")
}

// TestOneSwitchReader: every on/off setting takes the same words from
// every source, and the environment's reach the recipe.
func TestOneSwitchReader(t *testing.T) {
	for w, want := range map[string]string{"1": "true", "true": "true", "YES": "true", "on": "true", "y": "true", "T": "true",
		"0": "false", "false": "false", "No": "false", "off": "false", "n": "false", "f": "false", "": "false", " on ": "true",
		"maybe": "", "2": "", "tru": ""} {
		v, ok := ParseSwitch(w)
		require.Equal(t, want != "", ok, "%q", w)
		if ok {
			require.Equal(t, want, fmt.Sprint(v), "%q", w)
		}
		c, ok := boolean(strings.TrimSpace(w))
		require.Equal(t, want != "", ok, "settings, %q", w)
		require.Equal(t, want, c, "settings, %q", w)
		p := Config{MixedPrecision: "fp8"}
		err := p.resolve(env(EnvPrefix+"USE_AUTOCAST_DURING_EVAL", w))
		require.Equal(t, want != "", err == nil, "environment, %q: %v", w, err)
		if err == nil {
			r, err := p.Recipe()
			require.NoError(t, err)
			require.Equal(t, want == "true", r.EvalQuantized(), "environment, %q", w)
		}
	}
}
