package main

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
	"github.com/octetml/octet/recipe"
)

// sameBitsEnv, when set, makes TestKernelsTrainToTheSameBits the child
// that trains and prints its fingerprints.
const sameBitsEnv = "SAMEBITS_TEST_CHILD"

// sameBitsRecipes are the precisions the test trains: float32, bf16 and
// every FP8 recipe family.
var sameBitsRecipes = map[string]recipe.Recipe{
	"fp32": nil, "bf16": recipe.BF16{}, "fp8-delayed": recipe.TE{},
	"fp8-mxfp8": recipe.TE{UseMXFP8BlockScaling: true}, "fp8-block": recipe.Float8Block{},
	"nvfp4": recipe.NVFP4{}, "ao-rowwise": aoRowwise(),
}

func aoRowwise() recipe.Recipe {
	r, err := recipe.NewAO("rowwise")
	if err != nil {
		panic(err)
	}
	return r
}

// sameBitsRun is what the child prints: the kernels it ran and, per
// model and precision, the hash of every step's loss and of every
// parameter after the last step.
type sameBitsRun struct {
	Kernel, KernelBF16 string
	Hashes             map[string]uint64
}

// fingerprint trains a few steps and hashes losses and parameters (from
// the store: a program holds no parameter among its outputs).
func fingerprint(step func() error, prog *graph.Program, loss *graph.Node, store *graph.Store, steps int) (uint64, error) {
	h := fnv.New64a()
	put := func(v float32) {
		u := math.Float32bits(v)
		h.Write([]byte{byte(u), byte(u >> 8), byte(u >> 16), byte(u >> 24)})
	}
	for i := 0; i < steps; i++ {
		if err := step(); err != nil {
			return 0, err
		}
		l, err := prog.Scalar(loss)
		if err != nil {
			return 0, err
		}
		put(l)
	}
	params := 0
	for _, n := range prog.Graph().Nodes() {
		if n.IsParam() {
			v := store.Float32(n.Name())
			if v == nil {
				return 0, fmt.Errorf("parameter %s has no value in the store", n.Name())
			}
			for _, x := range v {
				put(x)
			}
			params++
		}
	}
	if params == 0 {
		return 0, fmt.Errorf("no parameter hashed")
	}
	return h.Sum64(), nil
}

// sameBitsHashes trains the baby GPT (two layers) and the MLP three
// steps in every precision of sameBitsRecipes and returns their
// fingerprints.
func sameBitsHashes(t *testing.T) map[string]uint64 {
	hashes := map[string]uint64{}
	cfg := gptConfig
	cfg.Layers = 2
	for name, rec := range sameBitsRecipes {
		step, prog, loss, store, err := gptTrainingStore(cfg, 4, rec, false)
		if err != nil {
			t.Fatal(err)
		}
		if hashes["gpt/"+name], err = fingerprint(step, prog, loss, store, 3); err != nil {
			t.Fatal(err)
		}
		mstep, mprog, mloss, mstore, err := mlpTrainingStore(32, rec, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		if hashes["mlp/"+name], err = fingerprint(mstep, mprog, mloss, mstore, 3); err != nil {
			t.Fatal(err)
		}
	}
	return hashes
}

func sameBitsChild(t *testing.T) {
	run := sameBitsRun{Kernel: kernels.Kernel(), KernelBF16: kernels.KernelBF16(), Hashes: sameBitsHashes(t)}
	b, _ := json.Marshal(run)
	fmt.Printf("SAMEBITS %s\n", b)
}

// TestKernelsTrainToTheSameBits trains the baby GPT (two layers) and the
// MLP for three steps in float32, bf16 and each FP8 recipe family with
// every GEMM kernel this CPU can run (forced by OCTET_GEMM_KERNEL) and
// with AVX-512 switched off (GODEBUG=cpu.avx512f=off: the AVX2 kernels),
// each in a fresh process, and compares every loss and parameter bit
// for bit with the default kernels. float32 is compared everywhere; bf16
// and FP8 wherever both runs have a bf16 kernel in VDPBF16PS order
// (AVX512_BF16 or the Go twin; not AMX, whose order is its own, and not
// CPUs without one, whose FP8 GEMMs decode to float32 and sum in
// float32 order).
func TestKernelsTrainToTheSameBits(t *testing.T) {
	if os.Getenv(sameBitsEnv) != "" {
		sameBitsChild(t)
		return
	}
	if testing.Short() {
		t.Skip("trains in several processes")
	}
	if pureGo {
		t.Skip("purego: every kernel is its Go twin (internal/kernels' fixed-hash test covers them)")
	}
	child := func(env ...string) sameBitsRun {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run", "^TestKernelsTrainToTheSameBits$", "-test.count=1")
		cmd.Env = append(append(os.Environ(), sameBitsEnv+"=1"), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", env, err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if s, ok := strings.CutPrefix(line, "SAMEBITS "); ok {
				var r sameBitsRun
				if err := json.Unmarshal([]byte(s), &r); err != nil {
					t.Fatal(err)
				}
				return r
			}
		}
		t.Fatalf("%v: no result in\n%s", env, out)
		return sameBitsRun{}
	}
	orderBF16 := func(name string) bool { return name != "none" && !strings.Contains(name, "amx") }
	base := child(kernels.KernelEnv + "=")
	envs := [][]string{{"GODEBUG=cpu.avx512f=off"}}
	for _, k := range kernels.Available() {
		envs = append(envs, []string{kernels.KernelEnv + "=" + strings.ReplaceAll(k, " ", "_")})
	}
	compared := 0
	for _, env := range envs {
		r := child(env...)
		keys := make([]string, 0, len(r.Hashes))
		for k := range r.Hashes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fp32 := strings.HasSuffix(k, "/fp32")
			if !fp32 && !(orderBF16(base.KernelBF16) && orderBF16(r.KernelBF16)) {
				continue
			}
			compared++
			if r.Hashes[k] != base.Hashes[k] {
				t.Errorf("%s with %v (kernels %s, %s): losses or parameters differ from the default kernels (%s, %s)",
					k, env, r.Kernel, r.KernelBF16, base.Kernel, base.KernelBF16)
			}
		}
		t.Logf("%v: kernels %s, %s", env, r.Kernel, r.KernelBF16)
	}
	if compared == 0 {
		t.Fatal("nothing compared")
	}
}

// trainedBitsWant holds sameBitsChild's hashes as computed on linux/amd64
// (AVX-512 and AVX2 kernels): the same on every machine and kernel —
// arm64's NEON kernels under qemu in CI included — except the bf16 and
// FP8 ones where the bf16 kernel is AMX's (its own order) or none
// (OCTET_GEMM_KERNEL=fp32).
var trainedBitsWant = map[string]uint64{
	"gpt/ao-rowwise":  0x62d93cdb79d0f63b,
	"gpt/bf16":        0xb7cff7aec890623e,
	"gpt/fp32":        0x338146e4f1c45542,
	"gpt/fp8-block":   0xe246928ab460d689,
	"gpt/fp8-delayed": 0xa62de6935b6b330b,
	"gpt/fp8-mxfp8":   0xdbd237420b2be88,
	"gpt/nvfp4":       0xbbdd68ca341b1f6a,
	"mlp/ao-rowwise":  0x30e0ef7f69a1176,
	"mlp/bf16":        0xeb39e037bf9f2d90,
	"mlp/fp32":        0x95690cf1e592b540,
	"mlp/fp8-block":   0xb2720f83ff078867,
	"mlp/fp8-delayed": 0x1be7f6a20a3179af,
	"mlp/fp8-mxfp8":   0xb8c5e52c41271bbe,
	"mlp/nvfp4":       0x7196d8c3597f8446,
}

// TestTrainsToFixedBits trains what TestKernelsTrainToTheSameBits trains,
// in this process with the default kernels, and compares every hash with
// the fixed ones: a training run's losses and parameters do not depend
// on the machine.
func TestTrainsToFixedBits(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 14 models")
	}
	got := sameBitsHashes(t)
	lowOK := !strings.Contains(kernels.KernelBF16(), "amx") && kernels.KernelBF16() != "none"
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var all []string
	bad := 0
	for _, k := range keys {
		all = append(all, fmt.Sprintf("\t%q: %#x,", k, got[k]))
		if !strings.HasSuffix(k, "/fp32") && !lowOK {
			continue
		}
		if want, ok := trainedBitsWant[k]; !ok || want != got[k] {
			t.Errorf("%s: losses or parameters differ from the fixed hash (kernels %s, %s)", k, kernels.Kernel(), kernels.KernelBF16())
			bad++
		}
	}
	if bad > 0 {
		t.Logf("this machine gives:\n%s", strings.Join(all, "\n"))
	}
}
