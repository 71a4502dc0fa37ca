package data_test

import (
	"fmt"
	"strings"

	"github.com/octetml/octet/data"
)

// A CSV file becomes a dataset; a loader draws shuffled batches of it,
// the last one padded and masked.
func ExampleLoader() {
	csv := "sepal,petal,class\n5.1,1.4,0\n7.0,4.7,1\n6.3,6.0,2\n4.9,1.5,0\n5.8,5.1,2\n"
	table, err := data.ParseCSV(strings.NewReader(csv), "iris.csv", data.CSVConfig{Label: "class"})
	if err != nil {
		fmt.Println(err)
		return
	}
	loader, err := data.NewLoader(table, data.Config{BatchSize: 2, Shuffle: true, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer loader.Close()
	for range loader.BatchesPerEpoch() {
		b, err := loader.Next()
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(b.Rows, b.Float32("x"), b.Int32("label"), b.Mask)
	}
	// Output:
	// 2 [7 4.7 5.1 1.4] [1 0] [1 1]
	// 2 [5.8 5.1 6.3 6] [2 2] [1 1]
	// 1 [4.9 1.5 0 0] [0 -100] [1 0]
}

// A bad cell is refused with the file, line and column.
func ExampleReadCSV_error() {
	_, err := data.ParseCSV(strings.NewReader("a,label\n1,0\n2,x\n"), "d.csv", data.CSVConfig{Label: "label"})
	fmt.Println(err)
	// Output: data: d.csv:3: column 2 ("label"): label "x" is not an integer
}

// GPT-2's byte-pair encoding, offline: text to token ids and back.
func ExampleNewBPE() {
	bpe, err := data.NewBPE("r50k_base")
	if err != nil {
		fmt.Println(err)
		return
	}
	ids, _ := bpe.Encode("Octet trains in FP8.")
	text, _ := bpe.Decode(ids)
	fmt.Println(len(ids), bpe.VocabSize(), text)
	// Output:
	// 7 50257 Octet trains in FP8.
}

// A regression: float targets from named columns (field "target"), and a
// standardizer of them for any dataset.
func ExampleReadCSV_regression() {
	csv := "rooms,age,price,rent\n3,10,250.5,1.2\n4,2,400,1.9\n2,40,120.25,0.8\n"
	tab, _ := data.ParseCSV(strings.NewReader(csv), "houses.csv", data.CSVConfig{Targets: []string{"price", "rent"}})
	fmt.Println(tab.Task(), tab.Features, tab.Targets, tab.T)
	s, _ := data.FitStandardizer(tab, "target")
	ds, _ := s.Dataset(tab) // targets standardised as batches are filled
	l, _ := data.NewLoader(ds, data.Config{BatchSize: 3})
	b, _ := l.Next()
	fmt.Printf("%.3f\n", b.Float32("target")[:2])
	row := append([]float32(nil), b.Float32("target")[:2]...)
	_ = s.Invert(row)
	fmt.Println(row)
	// Output:
	// regression [rooms age] [price rent] [250.5 1.2 400 1.9 120.25 0.8]
	// [-0.056 -0.220]
	// [250.5 1.2]
}
