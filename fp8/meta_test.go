package fp8

import (
	"math"
	"testing"
)

func relClose(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Abs(b) }

func fill(n int, v float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// TestWorkedExample reproduces the worked example of the package doc: margin
// 2, HYBRID; at step k, x is filled with k+0.25, w with k+0.5 and dy with
// k+0.75.
func TestWorkedExample(t *testing.T) {
	want := map[string][4]float64{
		"input":       {448, 89.6, 49.778, 34.4615},
		"weight":      {224, 74.667, 44.8, 32},
		"grad_output": {19114.67, 8192, 5213.09, 3822.93},
	}
	for _, algo := range []AmaxAlgo{MostRecent, MaxAlgo} {
		// HYBRID, margin 2, a 1024-step window, as recipe.TE{Margin: 2}.
		metas := map[string]*Meta{"input": NewMeta(E4M3, 1024, 2, algo, 1), "weight": NewMeta(E4M3, 1024, 2, algo, 1),
			"grad_output": NewMeta(E5M2, 1024, 2, algo, 1)}
		offsets := map[string]float32{"input": 0.25, "weight": 0.5, "grad_output": 0.75}
		q := make([]uint8, 256)
		for k := 0; k < 4; k++ {
			for name, m := range metas {
				src := fill(256, float32(k)+offsets[name])
				m.Record(quantize(q, src, m.Format, m.Scale))
			}
			for name, m := range metas {
				m.Update()
				if !relClose(float64(m.Scale), want[name][k], 1e-4) {
					t.Errorf("%v: %s scale after step %d = %v, want %v", algo, name, k, m.Scale, want[name][k])
				}
				if m.ScaleInv != 1/m.Scale {
					t.Errorf("scale_inv is not 1/scale")
				}
			}
		}
	}
}

func TestFirstStepUsesScaleOneAndSaturates(t *testing.T) {
	m := NewMeta(E4M3, 1024, 0, MostRecent, 1)
	q := make([]uint8, 1)
	m.Record(quantize(q, []float32{1000}, m.Format, m.Scale))
	if E4M3.Decode(q[0]) != 448 {
		t.Fatalf("first step: 1000 cast to %v, want 448 (saturated with scale 1)", E4M3.Decode(q[0]))
	}
	m.Update()
	if m.Scale != 448.0/1000 {
		t.Fatalf("scale %v", m.Scale)
	}
}

func TestKeepScaleOnZeroInfNaN(t *testing.T) {
	for _, algo := range []AmaxAlgo{MostRecent, MaxAlgo} {
		m := NewMeta(E4M3, 4, 0, algo, 1)
		m.Record(2)
		m.Update()
		base := m.Scale // 224
		if base != 224 {
			t.Fatalf("scale %v", base)
		}
		hist := append([]float32(nil), m.History...)
		m.Record(0) // amax 0: as if the layer did not run — kept, not rolled
		m.Update()
		if m.Scale != base || m.Steps != 1 {
			t.Errorf("%v: amax 0 changed the state: scale %v, steps %d", algo, m.Scale, m.Steps)
		}
		for i := range hist {
			if m.History[i] != hist[i] {
				t.Fatalf("%v: amax 0 rolled the history: %v → %v", algo, hist, m.History)
			}
		}
		m.Record(float32(math.Inf(1)))
		m.Update()
		if m.Scale != base {
			t.Errorf("%v: inf amax changed the scale to %v", algo, m.Scale)
		}
		if m.NonFinite != 1 {
			t.Errorf("NonFinite = %d, want 1", m.NonFinite)
		}
		// While the inf stays in the 4-slot window, max keeps the scale.
		m.Record(1)
		m.Update()
		if algo == MaxAlgo && m.Scale != base {
			t.Errorf("max: scale changed to %v with inf in the window", m.Scale)
		}
		if algo == MostRecent && m.Scale != 448 {
			t.Errorf("most_recent: scale %v, want 448", m.Scale)
		}
		m.Record(1)
		m.Update()
		m.Record(1)
		m.Update() // window now [cur, 1, 1, 1]: the inf has left
		m.Record(1)
		m.Update()
		if m.Scale != 448 {
			t.Errorf("%v: scale %v after the inf left the window, want 448", algo, m.Scale)
		}
	}
}

func TestNaNStep(t *testing.T) {
	// Under max the window maximum skips NaN (fmaxf), so a NaN step still
	// updates the scale from the rest of the window; under most_recent the
	// NaN step keeps the old scale.
	mx := NewMeta(E4M3, 2, 0, MaxAlgo, 1)
	for _, a := range []float32{2, 1} {
		mx.Record(a)
		mx.Update()
	}
	if mx.Scale != 224 {
		t.Fatalf("max: scale %v before the NaN step, want 224", mx.Scale)
	}
	mx.Record(2)
	mx.Record(float32(math.NaN()))
	mx.Record(3) // NaN sticks for the step
	if !math.IsNaN(float64(mx.History[0])) {
		t.Fatalf("current slot %v, want NaN", mx.History[0])
	}
	mx.Update() // window [NaN, 1]: amax 1
	if mx.Scale != 448 {
		t.Errorf("max: scale after the NaN step = %v, want 448 (not frozen)", mx.Scale)
	}
	mr := NewMeta(E4M3, 2, 0, MostRecent, 1)
	for _, a := range []float32{1, 2} {
		mr.Record(a)
		mr.Update()
	}
	mr.Record(float32(math.NaN()))
	mr.Update()
	if mr.Scale != 224 {
		t.Errorf("most_recent: scale after the NaN step = %v, want 224 (kept)", mr.Scale)
	}
	if mx.NonFinite != 1 || mr.NonFinite != 1 {
		t.Errorf("NonFinite = %d, %d, want 1, 1", mx.NonFinite, mr.NonFinite)
	}
}

func TestMostRecentVersusMaxOnFallingSequence(t *testing.T) {
	mr := NewMeta(E4M3, 16, 0, MostRecent, 1)
	mx := NewMeta(E4M3, 16, 0, MaxAlgo, 1)
	for _, a := range []float32{8, 4, 2, 1} {
		mr.Record(a)
		mx.Record(a)
		mr.Update()
		mx.Update()
	}
	if mr.Scale != 448 {
		t.Errorf("most_recent scale %v, want 448/1", mr.Scale)
	}
	if mx.Scale != 56 {
		t.Errorf("max scale %v, want 448/8", mx.Scale)
	}
}

func TestRollAndNoRollWithoutRecord(t *testing.T) {
	m := NewMeta(E5M2, 3, 0, MaxAlgo, 1)
	m.Record(5)
	m.Update()
	m.Record(7)
	m.Update()
	want := []float32{0, 5, 7}
	for i := range want {
		if m.History[i] != want[i] {
			t.Fatalf("history %v, want %v", m.History, want)
		}
	}
	before := m.Clone()
	m.Update() // the layer did not run: nothing changes
	if m.Steps != before.Steps || m.Scale != before.Scale || m.History[2] != 7 {
		t.Fatalf("an unrecorded update changed the state: %v", m)
	}
}

func TestIntervalAndOverflow(t *testing.T) {
	m := NewMeta(E4M3, 4, 0, MostRecent, 3)
	for step := 1; step <= 6; step++ {
		m.Record(float32(step))
		m.Update()
		switch step {
		case 1, 2:
			if m.Scale != 1 {
				t.Fatalf("step %d: scale updated before the interval", step)
			}
		case 3, 4, 5:
			if m.Scale != 448.0/3 {
				t.Fatalf("step %d: scale %v, want 448/3", step, m.Scale)
			}
		case 6:
			if m.Scale != 448.0/6 {
				t.Fatalf("step 6: scale %v", m.Scale)
			}
		}
	}
	o := NewMeta(E5M2, 1, 0, MostRecent, 1)
	o.Record(1e-38)
	o.Update()
	if o.Scale != math.MaxFloat32 || o.Overflows != 1 {
		t.Fatalf("overflowing scale %v (overflows %d), want FLT_MAX", o.Scale, o.Overflows)
	}
}

// TestIntervalZeroOnAnExistingMeta sets Interval to 0 (or less) on a Meta
// after construction: Update treats it as every step instead of dividing
// by zero.
func TestIntervalZeroOnAnExistingMeta(t *testing.T) {
	for _, iv := range []int{0, -3} {
		m := NewMeta(E4M3, 1024, 0, MostRecent, 1)
		m.Interval = iv
		m.Record(2)
		m.Update()
		if m.Scale != 224 {
			t.Fatalf("Interval %d: scale %v after one step, want 224", iv, m.Scale)
		}
	}
}
