// Package nn holds layers that build graph pieces with fully qualified
// names ("mlp.fc1"), their seeded initialisers, and a Builder that
// collects a model's parameters; two whole models, GPT (GPT-2's
// architecture) and Llama (RMSNorm, SwiGLU, rotary embeddings,
// grouped-query attention, under Hugging Face's parameter names).
// Package hf reads and writes them in Hugging Face's transformers
// layout.
package nn

import (
	"hash/fnv"
	"math"
	"math/rand/v2"

	"github.com/octetml/octet/graph"
)

// Initializer fills a new parameter of the given shape. rng is seeded
// from the model seed and the parameter's name, so values do not depend
// on the order parameters are created or initialised in.
type Initializer func(rng *rand.Rand, shape graph.Shape, data []float32)

// fans returns fan-in and fan-out of a weight [out in ...] (PyTorch's
// convention).
func fans(s graph.Shape) (in, out float64) {
	switch len(s) {
	case 0:
		return 1, 1
	case 1:
		return float64(s[0]), float64(s[0])
	}
	recept := float64(s.Numel() / (s[0] * s[1]))
	return float64(s[1]) * recept, float64(s[0]) * recept
}

func uniform(rng *rand.Rand, data []float32, bound float64) {
	for i := range data {
		data[i] = float32((2*rng.Float64() - 1) * bound) // fused: rand's k·2⁻⁵³ times 2, minus 1, is exact
	}
}

func normal(rng *rand.Rand, data []float32, std float64) {
	for i := range data {
		data[i] = float32(rng.NormFloat64() * std)
	}
}

// Zeros fills with 0.
func Zeros(_ *rand.Rand, _ graph.Shape, data []float32) { clear(data) }

// Ones fills with 1.
func Ones(_ *rand.Rand, _ graph.Shape, data []float32) {
	for i := range data {
		data[i] = 1
	}
}

// Normal returns an initialiser drawing from N(0, std²).
func Normal(std float64) Initializer {
	return func(rng *rand.Rand, _ graph.Shape, data []float32) { normal(rng, data, std) }
}

// KaimingUniform is He initialisation for ReLU layers,
// U(−b, b) with b = √(6 / fan_in).
func KaimingUniform(rng *rand.Rand, s graph.Shape, data []float32) {
	in, _ := fans(s)
	uniform(rng, data, math.Sqrt(6/in))
}

// KaimingNormal is He initialisation for ReLU layers, N(0, 2 / fan_in).
func KaimingNormal(rng *rand.Rand, s graph.Shape, data []float32) {
	in, _ := fans(s)
	normal(rng, data, math.Sqrt(2/in))
}

// XavierUniform is Glorot initialisation, U(−b, b) with
// b = √(6 / (fan_in + fan_out)).
func XavierUniform(rng *rand.Rand, s graph.Shape, data []float32) {
	in, out := fans(s)
	uniform(rng, data, math.Sqrt(6/(in+out)))
}

// XavierNormal is Glorot initialisation, N(0, 2 / (fan_in + fan_out)).
func XavierNormal(rng *rand.Rand, s graph.Shape, data []float32) {
	in, out := fans(s)
	normal(rng, data, math.Sqrt(2/(in+out)))
}

// LinearDefault is PyTorch's nn.Linear weight initialisation
// (kaiming_uniform with a = √5): U(−1/√fan_in, 1/√fan_in).
func LinearDefault(rng *rand.Rand, s graph.Shape, data []float32) {
	in, _ := fans(s)
	uniform(rng, data, 1/math.Sqrt(in))
}

// BiasDefault returns PyTorch's nn.Linear bias initialisation for a
// layer with fanIn inputs: U(−1/√fan_in, 1/√fan_in).
func BiasDefault(fanIn int) Initializer {
	return func(rng *rand.Rand, _ graph.Shape, data []float32) { uniform(rng, data, 1/math.Sqrt(float64(fanIn))) }
}

// paramRNG seeds a generator for one parameter.
func paramRNG(seed uint64, name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}
