package main

import (
	"fmt"
	"testing"
)

func TestZZNodeProfile(t *testing.T) {
	step, prog, err := octetGPTProgram(nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		step()
	}
	prog.SetProfiling(true)
	for i := 0; i < 30; i++ {
		step()
	}
	pr := prog.Profile()
	fmt.Println("total ms/step", float64(pr.Total.Microseconds())/1000/30)
	for _, r := range pr.Nodes[:45] {
		fmt.Printf("%-45s %8.3f ms\n", r.Name, float64(r.Total.Microseconds())/1000/30)
	}
}
