package server

import (
	"testing"

	"github.com/annal-dev/annal/internal/klogtest"
)

func TestMain(m *testing.M) { klogtest.Main(m) }
