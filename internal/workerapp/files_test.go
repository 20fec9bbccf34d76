package workerapp

import (
	"testing"

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// TestFileDefaultsAgree: the registry's defaults of the attachment and
// share caps are the sandbox package's zero-value defaults, and what
// configureFiles hands the activities.
func TestFileDefaultsAgree(t *testing.T) {
	t.Setenv("SANDBOT_MODEL_VISION", "true")
	cfg := config.Load()
	acts := &sandbox.Activities{}
	if err := configureFiles(acts, cfg); err != nil {
		t.Fatal(err)
	}
	want := sandbox.AttachLimits{MaxFiles: sandbox.DefaultAttachMaxFiles, MaxFileBytes: sandbox.DefaultAttachMaxFileBytes,
		MaxTotalBytes: sandbox.DefaultAttachMaxTotalBytes, VisionMaxBytes: 5 << 20}
	if acts.Attach != want || acts.ShareMaxBytes != sandbox.DefaultShareMaxBytes || acts.ShareMaxBytes > session.MaxShareBytesCeiling || acts.Fetcher == nil {
		t.Fatalf("limits %+v, share %d, fetcher %v", acts.Attach, acts.ShareMaxBytes, acts.Fetcher)
	}
	t.Setenv("SANDBOT_MODEL_VISION", "false")
	acts = &sandbox.Activities{}
	if err := configureFiles(acts, config.Load()); err != nil {
		t.Fatal(err)
	}
	if acts.Attach.VisionMaxBytes != 0 {
		t.Fatalf("without vision no image is kept for the model: %+v", acts.Attach)
	}
}
