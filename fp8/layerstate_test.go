package fp8

import (
	"encoding/json"
	"testing"
)

func TestBackendAndRoleNames(t *testing.T) {
	for _, b := range []Backend{BackendTE, BackendAO, BackendMSAMP, BackendBF16} {
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		var back Backend
		if err := json.Unmarshal(j, &back); err != nil || back != b {
			t.Fatalf("%v: %s → %v, %v", b, j, back, err)
		}
	}
	if want := `"te"`; mustJSON(t, BackendTE) != want {
		t.Fatalf("BackendTE marshals as %s, want %s (checkpoints store it)", mustJSON(t, BackendTE), want)
	}
	var b Backend
	if err := json.Unmarshal([]byte(`"deepspeed"`), &b); err == nil {
		t.Fatal("an unknown backend name was accepted")
	}
	if _, err := json.Marshal(Backend(0)); err == nil {
		t.Fatal("the zero backend marshalled")
	}
	for r, want := range map[TensorRole]string{RoleInput: "input", RoleWeight: "weight", RoleGradOutput: "grad_output"} {
		if r.String() != want || r.IsBackward() != (r == RoleGradOutput) {
			t.Fatalf("role %d: %q backward=%v", r, r.String(), r.IsBackward())
		}
	}
	m := func(f Format) *Meta { return NewMeta(f, 1024, 0, MostRecent, 1) }
	st := &LayerState{FQN: "fc", Backend: BackendTE, Input: m(E4M3), Weight: m(E4M3), GradOutput: m(E5M2)}
	if st.Meta(RoleInput) != st.Input || st.Meta(RoleWeight) != st.Weight || st.Meta(RoleGradOutput) != st.GradOutput || st.Meta(0) != nil {
		t.Fatal("LayerState.Meta picks the wrong state")
	}
	if LayerStateKey("fc") != "fc.fp8_state" {
		t.Fatalf("key %q", LayerStateKey("fc"))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(j)
}
