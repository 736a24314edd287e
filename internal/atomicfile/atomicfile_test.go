package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("source broke")
	}
	f.n--
	return copy(p, "part"), nil
}

func TestWriteReplacesWholeOrNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := Write(path, strings.NewReader("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, &failingReader{n: 3}, 0o644); err == nil {
		t.Fatal("a failing source was written")
	}
	got, _ := os.ReadFile(path)
	if string(got) != "old" {
		t.Fatalf("after a failed write the file holds %q", got)
	}
	if err := Write(path, io.MultiReader(strings.NewReader("n"), strings.NewReader("ew")), 0o640); err != nil {
		t.Fatal(err)
	}
	got, _ = os.ReadFile(path)
	fi, _ := os.Stat(path)
	if string(got) != "new" || fi.Mode().Perm() != 0o640 {
		t.Fatalf("file %q mode %v", got, fi.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}
