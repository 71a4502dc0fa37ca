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
