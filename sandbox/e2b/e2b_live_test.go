package e2b_test

import (
	"os"
	"testing"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/e2b"
	"github.com/sandbot/sandbot/sandbox/sandboxtest"
)

// TestLiveConformance runs the conformance kit against the real E2B when
// E2B_API_KEY is set (E2B_API_URL, E2B_DOMAIN and SANDBOT_E2B_TEMPLATE are
// honoured too). It creates and kills real sandboxes, billed to the key's
// team.
func TestLiveConformance(t *testing.T) {
	key := os.Getenv("E2B_API_KEY")
	if key == "" {
		t.Skip("e2b live test: set E2B_API_KEY to run against the real service; the only test allowed to skip in CI")
	}
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend {
		b, err := e2b.New(e2b.Options{
			APIKey:   key,
			APIURL:   os.Getenv("E2B_API_URL"),
			Domain:   os.Getenv("E2B_DOMAIN"),
			Template: os.Getenv("SANDBOT_E2B_TEMPLATE"),
		})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}
