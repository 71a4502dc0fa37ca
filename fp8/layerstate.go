package fp8

import "fmt"

// Backend names the conversion backend a recipe selects.
type Backend uint8

// The backends. The zero Backend is none (a float32 layer).
const (
	BackendTE    Backend = iota + 1 // Transformer Engine: delayed scaling, MXFP8
	BackendAO                       // torchao: current (dynamic) scaling
	BackendMSAMP                    // MS-AMP: delayed, power-of-two scaling
	BackendBF16                     // bf16 mixed precision (no scaling state)
)

var backendNames = [...]string{"none", "te", "ao", "msamp", "bf16"}

// String returns "te", "ao", "msamp", "bf16" (or "none").
func (b Backend) String() string {
	if int(b) < len(backendNames) {
		return backendNames[b]
	}
	return fmt.Sprintf("Backend(%d)", uint8(b))
}

// MarshalText writes the backend's name (checkpoints keep it as text).
func (b Backend) MarshalText() ([]byte, error) {
	if b == 0 || int(b) >= len(backendNames) {
		return nil, fmt.Errorf("fp8: backend %d has no name", uint8(b))
	}
	return []byte(b.String()), nil
}

// UnmarshalText reads a backend's name.
func (b *Backend) UnmarshalText(text []byte) error {
	for i, n := range backendNames[1:] {
		if string(text) == n {
			*b = Backend(i + 1)
			return nil
		}
	}
	return fmt.Errorf("fp8: unknown backend %q (want te, ao, msamp or bf16)", text)
}

// TensorRole names one of the three tensors a linear layer's GEMMs cast:
// its input (activation), its weight, and the gradient of its output.
type TensorRole uint8

// The tensor roles; the zero TensorRole is none.
const (
	RoleInput TensorRole = iota + 1
	RoleWeight
	RoleGradOutput
)

// Roles lists the tensor roles in order.
var Roles = [...]TensorRole{RoleInput, RoleWeight, RoleGradOutput}

var roleNames = [...]string{"", "input", "weight", "grad_output"}

// String returns "input", "weight" or "grad_output" (TE's names), or ""
// for none.
func (r TensorRole) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return fmt.Sprintf("TensorRole(%d)", uint8(r))
}

// IsBackward reports whether the tensor belongs to the backward pass
// (HYBRID casts it to E5M2).
func (r TensorRole) IsBackward() bool { return r == RoleGradOutput }

// LayerState is the conversion state of one linear layer, shared by all
// its casts and kept in the parameter store (under LayerStateKey(FQN))
// so that training and evaluation programs share it and checkpoints save
// it: the backend, and with delayed scaling one Meta per tensor role
// (nil for recipes without delayed scaling).
type LayerState struct {
	FQN                       string
	Backend                   Backend
	Input, Weight, GradOutput *Meta
}

// LayerStateKey is the store key of a layer's LayerState.
func LayerStateKey(fqn string) string { return fqn + ".fp8_state" }

// Meta returns the scaling state of one tensor role, or nil.
func (s *LayerState) Meta(r TensorRole) *Meta {
	switch r {
	case RoleInput:
		return s.Input
	case RoleWeight:
		return s.Weight
	case RoleGradOutput:
		return s.GradOutput
	}
	return nil
}
