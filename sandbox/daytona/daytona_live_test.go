package daytona_test

import (
	"os"
	"testing"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/daytona"
	"github.com/sandbot/sandbot/sandbox/sandboxtest"
)

// TestLiveConformance runs the conformance kit against the real Daytona
// service, with the key in DAYTONA_API_KEY (and optionally DAYTONA_API_URL,
// DAYTONA_TARGET, SANDBOT_DAYTONA_SNAPSHOT). It creates and destroys real
// sandboxes, which costs money.
func TestLiveConformance(t *testing.T) {
	key := os.Getenv("DAYTONA_API_KEY")
	if key == "" {
		t.Skip("live Daytona: set DAYTONA_API_KEY to run against the real service; the only test allowed to skip in CI")
	}
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend {
		b, err := daytona.New(daytona.Options{
			APIURL:     os.Getenv("DAYTONA_API_URL"),
			APIKey:     key,
			Target:     os.Getenv("DAYTONA_TARGET"),
			Snapshot:   os.Getenv("SANDBOT_DAYTONA_SNAPSHOT"),
			Deployment: "sandbot-live-test",
			Logger:     quiet(),
		})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}
