package errkind

import (
	"errors"
	"io"
	"testing"
)

func TestWith(t *testing.T) {
	kind := errors.New("kind")
	err := With(io.ErrUnexpectedEOF, kind)
	if !errors.Is(err, kind) || !errors.Is(err, io.ErrUnexpectedEOF) || err.Error() != io.ErrUnexpectedEOF.Error() {
		t.Fatalf("%v", err)
	}
}
