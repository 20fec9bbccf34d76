package workerapp

import (
	"strconv"
	"testing"
	"time"

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/docker"
	"github.com/sandbot/sandbot/sandbox/local"
	"github.com/sandbot/sandbot/session"
)

// TestCommandTimeoutCeiling: configuration refuses a maximum command
// timeout above what the sandbox's exec activities allow, so nothing is
// clamped silently. The sandbox's limit and config's ceiling must agree.
func TestCommandTimeoutCeiling(t *testing.T) {
	if config.MaxCommandTimeoutCeiling != sandbox.MaxCommandTimeout {
		t.Fatalf("config accepts commands up to %s, the sandbox clamps them to %s", config.MaxCommandTimeoutCeiling, sandbox.MaxCommandTimeout)
	}
	// Backends fall back to their own defaults only when the assembly
	// passes none; until they refer to the session contract's, they must
	// at least agree with it.
	for _, d := range []time.Duration{sandbox.DefaultCommandTimeout, docker.DefaultTimeout, local.DefaultTimeout} {
		if d != session.DefaultCommandTimeout {
			t.Fatalf("a backend's default command timeout is %s, the session's %s", d, session.DefaultCommandTimeout)
		}
	}
}

// TestDocumentedDockerDefaults: the registry documents the docker
// backend's defaults (config passes zero through), so it must say what the
// backend does.
func TestDocumentedDockerDefaults(t *testing.T) {
	want := map[string]string{
		"SANDBOT_DOCKER_IMAGE":      docker.DefaultImage,
		"SANDBOT_DOCKER_NETWORK":    docker.DefaultNetwork,
		"SANDBOT_DOCKER_USER":       docker.DefaultUser,
		"SANDBOT_DOCKER_WORKDIR":    docker.DefaultWorkdir,
		"SANDBOT_DOCKER_PIDS_LIMIT": strconv.Itoa(docker.DefaultPidsLimit),
		"SANDBOT_DOCKER_CPUS":       strconv.FormatFloat(docker.DefaultCPUs, 'g', -1, 64),
		"SANDBOT_DOCKER_MEMORY":     "1g",
	}
	if docker.DefaultMemory != 1<<30 {
		t.Errorf("docker's default memory is %d bytes; update the registry's 1g", docker.DefaultMemory)
	}
	for name, w := range want {
		v, ok := config.Lookup(name)
		if !ok {
			t.Fatalf("%s is not registered", name)
		}
		if v.Documented() != w {
			t.Errorf("%s documents %q, the backend's default is %q", name, v.Documented(), w)
		}
	}
}
