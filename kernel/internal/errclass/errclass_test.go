package errclass

import (
	"errors"
	"fmt"
	"os"
	"testing"
)

// NotFound is found through wrapping, and stands for os.ErrNotExist
// without saying "file does not exist".
func TestNotFound(t *testing.T) {
	err := fmt.Errorf("event 7: %w", NotFound)
	if !errors.Is(err, NotFound) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%v is not NotFound and os.ErrNotExist", err)
	}
	if errors.Is(err, Invalid) || errors.Is(fmt.Errorf("x: %w", Invalid), NotFound) {
		t.Fatal("the classes are not distinct")
	}
	if NotFound.Error() != "not found" {
		t.Fatalf("NotFound says %q", NotFound)
	}
}
