package chaos

import (
	"os"
	"testing"

	"github.com/sandbot/sandbot/internal/pgtemporal"
)

// TestMain runs the Temporal server instead of the tests when this test
// binary is the -cluster mode's server child (internal/pgtemporal).
func TestMain(m *testing.M) {
	pgtemporal.ServeIfChild()
	os.Exit(m.Run())
}
